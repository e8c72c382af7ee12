// Order statistics shared by the MCP benches (bench.mjs, world.mjs).

/** The q-quantile of `values` (linear between ranks); NaN for none. */
export function quantile(values, q) {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}

export const median = (v) => quantile(v, 0.5);
