//! A sandbox's egress rules as its create or `PUT …/network` gives them (`allowInternetAccess`,
//! `network.allowOut`/`denyOut`), checked and turned into the IPv4 prefixes the world must not
//! reach: pure address arithmetic, which e2b-local's world network installs as `unreachable`
//! routes (docs/design.md §7).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The most `allowOut` or `denyOut` entries of one sandbox.
pub const MAX_RULES: usize = 256;

/// An IPv4 prefix, its address masked to its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cidr {
    addr: u32,
    len: u8,
}

impl Cidr {
    pub fn new(addr: Ipv4Addr, len: u8) -> Option<Cidr> {
        (len <= 32).then(|| Cidr {
            addr: u32::from(addr) & mask(len),
            len,
        })
    }

    /// `a.b.c.d` (a /32) or `a.b.c.d/n`.
    pub fn parse(text: &str) -> Option<Cidr> {
        let (addr, len) = match text.split_once('/') {
            Some((addr, len)) => (addr, len.parse().ok()?),
            None => (text, 32),
        };
        Cidr::new(addr.parse().ok()?, len)
    }

    pub fn addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.addr)
    }

    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    fn first(&self) -> u64 {
        u64::from(self.addr)
    }

    fn last(&self) -> u64 {
        u64::from(self.addr | !mask(self.len))
    }

    /// Whether the two prefixes share an address.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        self.first() <= other.last() && other.first() <= self.last()
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr(), self.len)
    }
}

fn mask(len: u8) -> u32 {
    if len == 0 { 0 } else { u32::MAX << (32 - len) }
}

/// The addresses of `set` not in `holes`, as the fewest prefixes, in address order.
pub fn subtract(set: &[Cidr], holes: &[Cidr]) -> Vec<Cidr> {
    let mut ranges = merged(set);
    for hole in merged(holes) {
        ranges = ranges
            .into_iter()
            .flat_map(|(first, last)| {
                let mut left = Vec::new();
                if first < hole.0 {
                    left.push((first, last.min(hole.0 - 1)));
                }
                if last > hole.1 {
                    left.push((first.max(hole.1 + 1), last));
                }
                left
            })
            .collect();
    }
    ranges
        .into_iter()
        .flat_map(|(first, last)| prefixes(first, last))
        .collect()
}

/// `cidrs` as sorted, disjoint, non-adjacent inclusive ranges.
fn merged(cidrs: &[Cidr]) -> Vec<(u64, u64)> {
    let mut ranges: Vec<(u64, u64)> = cidrs.iter().map(|c| (c.first(), c.last())).collect();
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (first, last) in ranges {
        match out.last_mut() {
            Some(previous) if first <= previous.1 + 1 => previous.1 = previous.1.max(last),
            _ => out.push((first, last)),
        }
    }
    out
}

/// The fewest prefixes covering `first..=last` exactly.
fn prefixes(mut first: u64, last: u64) -> Vec<Cidr> {
    let mut out = Vec::new();
    while first <= last {
        // The largest aligned block starting at `first` that fits.
        let mut size: u64 = if first == 0 {
            1 << 32
        } else {
            1 << first.trailing_zeros().min(32)
        };
        while first + size - 1 > last {
            size >>= 1;
        }
        out.push(Cidr {
            addr: first as u32,
            len: 32 - size.trailing_zeros() as u8,
        });
        first += size;
    }
    out
}

/// What a sandbox may reach beyond its own network, as its create or `PUT …/network` gave it:
/// without internet access everything is denied; `allowOut` wins over `denyOut` and over that.
/// IPv6 entries are accepted and have nothing to do: a world has no IPv6 route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Egress {
    pub internet: bool,
    pub allow_out: Vec<String>,
    pub deny_out: Vec<String>,
    allow: Vec<Cidr>,
    deny: Vec<Cidr>,
}

impl Egress {
    /// Checks the rules: each entry an IPv4 or IPv6 address or prefix, at most [`MAX_RULES`] of
    /// each. Domain names need E2B's egress proxy, which e2b-local does not have: refused.
    pub fn new(
        internet: bool,
        allow_out: Vec<String>,
        deny_out: Vec<String>,
    ) -> Result<Egress, String> {
        let parse = |field: &str, entries: &[String]| -> Result<Vec<Cidr>, String> {
            if entries.len() > MAX_RULES {
                return Err(format!("{field}: at most {MAX_RULES} entries"));
            }
            let mut v4 = Vec::new();
            for entry in entries {
                if let Some(cidr) = Cidr::parse(entry) {
                    v4.push(cidr);
                } else if !is_ipv6_prefix(entry) {
                    return Err(format!(
                        "{field}: {entry:?} is not an IP address or CIDR prefix (domain names \
                         need E2B's egress proxy, which e2b-local does not have)"
                    ));
                }
            }
            Ok(v4)
        };
        Ok(Egress {
            allow: parse("allowOut", &allow_out)?,
            deny: parse("denyOut", &deny_out)?,
            internet,
            allow_out,
            deny_out,
        })
    }

    /// The prefixes the world must not reach: what is denied (everything without internet
    /// access) minus what is allowed.
    pub fn unreachable(&self) -> Vec<Cidr> {
        let everything = [Cidr { addr: 0, len: 0 }];
        let denied = if self.internet {
            &self.deny[..]
        } else {
            &everything[..]
        };
        subtract(denied, &self.allow)
    }
}

fn is_ipv6_prefix(text: &str) -> bool {
    let (addr, len) = text.split_once('/').unwrap_or((text, "128"));
    addr.parse::<Ipv6Addr>().is_ok() && len.parse::<u8>().is_ok_and(|l| l <= 128)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidrs(list: &[&str]) -> Vec<Cidr> {
        list.iter().map(|c| Cidr::parse(c).unwrap()).collect()
    }

    fn shown(list: &[Cidr]) -> Vec<String> {
        list.iter().map(Cidr::to_string).collect()
    }

    #[test]
    fn prefixes_parse_and_mask() {
        assert_eq!(Cidr::parse("10.1.2.3/8").unwrap().to_string(), "10.0.0.0/8");
        assert_eq!(Cidr::parse("10.1.2.3").unwrap().to_string(), "10.1.2.3/32");
        for bad in ["10.1.2.3/33", "10.1.2", "example.com", "10.1.2.3/x", ""] {
            assert!(Cidr::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn subtraction_is_exact() {
        assert_eq!(
            shown(&subtract(&cidrs(&["0.0.0.0/0"]), &cidrs(&["10.0.0.1"]))).len(),
            32
        );
        assert_eq!(
            shown(&subtract(&cidrs(&["10.0.0.0/30"]), &cidrs(&["10.0.0.1"]))),
            ["10.0.0.0/32", "10.0.0.2/31"]
        );
        // Allowed wins over a narrower deny inside it.
        assert!(subtract(&cidrs(&["10.1.2.3"]), &cidrs(&["10.0.0.0/8"])).is_empty());
        // Overlapping and adjacent prefixes merge.
        assert_eq!(
            shown(&subtract(
                &cidrs(&["10.0.0.0/25", "10.0.0.128/25", "10.0.0.5"]),
                &[]
            )),
            ["10.0.0.0/24"]
        );
        assert_eq!(shown(&subtract(&cidrs(&["0.0.0.0/0"]), &[])), ["0.0.0.0/0"]);
        assert!(subtract(&cidrs(&["0.0.0.0/0"]), &cidrs(&["0.0.0.0/0"])).is_empty());
        // Every address outside the holes is covered, none inside.
        let rest = subtract(
            &cidrs(&["192.168.0.0/16"]),
            &cidrs(&["192.168.7.9/30", "192.168.200.0/21"]),
        );
        for probe in [
            "192.168.7.7",
            "192.168.7.12",
            "192.168.199.255",
            "192.168.208.0",
        ] {
            let addr = Cidr::parse(probe).unwrap();
            assert!(rest.iter().any(|c| c.overlaps(&addr)), "{probe} kept");
        }
        for probe in ["192.168.7.8", "192.168.7.11", "192.168.203.4"] {
            let addr = Cidr::parse(probe).unwrap();
            assert!(!rest.iter().any(|c| c.overlaps(&addr)), "{probe} removed");
        }
    }

    #[test]
    fn egress_rules_deny_allow_and_refuse_domains() {
        let open = Egress::new(true, vec![], vec![]).unwrap();
        assert!(open.unreachable().is_empty());
        let closed = Egress::new(false, vec![], vec![]).unwrap();
        assert_eq!(shown(&closed.unreachable()), ["0.0.0.0/0"]);
        let pinhole = Egress::new(false, vec!["1.2.3.4".into()], vec![]).unwrap();
        assert_eq!(pinhole.unreachable().len(), 32);
        let denied = Egress::new(
            true,
            vec!["10.0.0.0/8".into()],
            vec!["0.0.0.0/0".into(), "::/0".into()],
        )
        .unwrap();
        assert_eq!(
            shown(&denied.unreachable()),
            [
                "0.0.0.0/5",
                "8.0.0.0/7",
                "11.0.0.0/8",
                "12.0.0.0/6",
                "16.0.0.0/4",
                "32.0.0.0/3",
                "64.0.0.0/2",
                "128.0.0.0/1"
            ]
        );
        let domain = Egress::new(true, vec!["example.com".into()], vec![]).unwrap_err();
        assert!(domain.contains("egress proxy"), "{domain}");
        let many = Egress::new(true, vec![], vec!["1.1.1.1".into(); MAX_RULES + 1]).unwrap_err();
        assert!(many.contains("at most"), "{many}");
    }
}
