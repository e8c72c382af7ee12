//! Whole-graph validation and the create order.
//!
//! Works on manifest entries and what each plugin's descriptor declares —
//! never on loaded instances — so the whole composition is judged before
//! anything is created. Every problem is collected; a plan comes out only
//! when there are none.
//!
//! Rules:
//! - disabled entries take no part (they provide nothing, need nothing, and
//!   may share an id with an enabled entry);
//! - ids are unique among enabled entries;
//! - for every service a plugin injects, an explicit `inject` binding
//!   chooses the provider; without one, the single *other* enabled entry
//!   providing it is used, and none or several is an error;
//! - a binding must name a known service the plugin injects and an enabled
//!   entry whose plugin provides it;
//! - create order is topological (providers first), manifest order
//!   breaking ties; a cycle is reported as `a -> b -> a`;
//! - each provided service has at most one *served* entry — the one the
//!   composition's user (`dsh`, `Host::fs` …) gets: the entry whose `serve`
//!   lists it, else the only provider, else the only provider no other
//!   entry consumes (a decorator over what it wraps). Several unconsumed
//!   providers and no `serve` is an error naming them; when every provider
//!   is consumed, none is served (the user asks by id).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use dsh_plugin_api::ServiceKind;

use crate::manifest::Entry;
use crate::validation::{IdList, ValidationError};

/// What a plugin's descriptor declares, as the graph needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Declared<'a> {
    pub name: &'a str,
    pub provides: &'a [ServiceKind],
    pub inject: &'a [ServiceKind],
}

/// One entry as the graph sees it. `declared` is `None` for disabled entries
/// and for entries whose library could not be read (already reported).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Node<'a> {
    pub entry: &'a Entry,
    pub declared: Option<Declared<'a>>,
}

/// The outcome of a valid graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Node indices in create order (enabled entries only).
    pub order: Vec<usize>,
    /// Per node, the provider node of each injected service, in the
    /// descriptor's inject order (empty for disabled nodes).
    pub wiring: Vec<Vec<(ServiceKind, usize)>>,
    /// The node serving each service that has a served entry.
    pub served: BTreeMap<ServiceKind, usize>,
}

/// Validates the graph; on success, the create order and wiring.
pub(crate) fn plan(nodes: &[Node<'_>]) -> Result<Plan, Vec<ValidationError>> {
    let mut errors = Vec::new();
    let enabled = |index: usize| !nodes[index].entry.disabled;

    // Ids: the first enabled entry owns an id.
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    let mut disabled_ids: HashMap<&str, usize> = HashMap::new();
    for (index, node) in nodes.iter().enumerate() {
        let id = node.entry.id.as_str();
        if !enabled(index) {
            disabled_ids.entry(id).or_insert(index);
            continue;
        }
        match by_id.get(id) {
            Some(first) => errors.push(ValidationError::DuplicateId {
                entry: node.entry.label.clone(),
                id: id.to_owned(),
                first: nodes[*first].entry.label.clone(),
            }),
            None => {
                by_id.insert(id, index);
            }
        }
    }
    let some_unknown = nodes
        .iter()
        .enumerate()
        .any(|(index, node)| enabled(index) && node.declared.is_none());
    let providers = Providers::new(nodes, &by_id);

    let mut wiring = vec![Vec::new(); nodes.len()];
    for (index, node) in nodes.iter().enumerate() {
        if !enabled(index) {
            continue;
        }
        let entry = node.entry;
        let label = || {
            let mut label = entry.label.clone();
            label.line = entry.inject_line.or(label.line);
            label
        };
        // Explicit bindings; `None` marks a binding already reported bad.
        let mut chosen: BTreeMap<ServiceKind, Option<usize>> = BTreeMap::new();
        for binding in &entry.inject {
            let Some(service) = ServiceKind::from_name(&binding.service) else {
                errors.push(ValidationError::UnknownService {
                    entry: label(),
                    service: binding.service.clone(),
                });
                continue;
            };
            let provider = binding.provider.as_str();
            let target = match by_id.get(provider) {
                Some(target) => Some(*target),
                None => {
                    errors.push(if disabled_ids.contains_key(provider) {
                        ValidationError::BindingToDisabled {
                            entry: label(),
                            service,
                            provider: provider.to_owned(),
                        }
                    } else {
                        ValidationError::BindingToUnknownId {
                            entry: label(),
                            service,
                            provider: provider.to_owned(),
                        }
                    });
                    None
                }
            };
            let mut valid = target.is_some();
            if let Some(declared) = node.declared
                && !declared.inject.contains(&service)
            {
                errors.push(ValidationError::BindingNotInjected {
                    entry: label(),
                    service,
                    plugin: declared.name.to_owned(),
                    injects: declared.inject.to_vec(),
                });
                valid = false;
            }
            if let Some(target) = target
                && let Some(provider_declared) = nodes[target].declared
                && !provider_declared.provides.contains(&service)
            {
                errors.push(ValidationError::BindingNotProvided {
                    entry: label(),
                    service,
                    provider: provider.to_owned(),
                    provides: provider_declared.provides.to_vec(),
                });
                valid = false;
            }
            chosen.insert(service, target.filter(|_| valid));
        }

        let Some(declared) = node.declared else {
            continue;
        };
        for &service in declared.inject {
            match chosen.get(&service) {
                Some(Some(target)) => wiring[index].push((service, *target)),
                Some(None) => {}
                None => {
                    let all = providers.of(service);
                    let itself = usize::from(all.binary_search(&index).is_ok());
                    let mut others = all.iter().copied().filter(|other| *other != index);
                    match all.len() - itself {
                        1 => wiring[index].extend(others.next().map(|only| (service, only))),
                        // An unreadable library may be the missing
                        // provider; its own error is the one to fix first.
                        0 if some_unknown => {}
                        0 => errors.push(ValidationError::MissingProvider {
                            entry: entry.label.clone(),
                            service,
                            plugin: declared.name.to_owned(),
                        }),
                        several => errors.push(ValidationError::AmbiguousProvider {
                            entry: entry.label.clone(),
                            service,
                            plugin: declared.name.to_owned(),
                            candidates: IdList::new(
                                others.map(|other| nodes[other].entry.id.clone()),
                                several,
                            ),
                        }),
                    }
                }
            }
        }
    }

    let served = served(nodes, &by_id, &providers, &wiring, &mut errors);
    let order = topological_order(nodes, &wiring, &mut errors);
    if errors.is_empty() {
        Ok(Plan {
            order,
            wiring,
            served,
        })
    } else {
        Err(errors)
    }
}

/// The members (enabled, readable entries that own their id) providing
/// each service, in manifest order — found once, so that choosing a
/// provider for each of n injections costs n lookups, not n scans.
struct Providers(BTreeMap<ServiceKind, Vec<usize>>);

impl Providers {
    fn new(nodes: &[Node<'_>], by_id: &HashMap<&str, usize>) -> Providers {
        let mut of: BTreeMap<ServiceKind, Vec<usize>> = BTreeMap::new();
        for (index, _, declared) in members(nodes, by_id) {
            for &service in declared.provides {
                let list = of.entry(service).or_default();
                // A descriptor listing a service twice provides it once.
                if list.last() != Some(&index) {
                    list.push(index);
                }
            }
        }
        Providers(of)
    }

    /// Ascending node indices.
    fn of(&self, service: ServiceKind) -> &[usize] {
        self.0.get(&service).map_or(&[], Vec::as_slice)
    }
}

/// Enabled, readable entries that own their id: the ones that provide,
/// and are served, in manifest order.
fn members<'a>(
    nodes: &'a [Node<'a>],
    by_id: &'a HashMap<&str, usize>,
) -> impl Iterator<Item = (usize, &'a Entry, Declared<'a>)> {
    nodes.iter().enumerate().filter_map(|(index, node)| {
        let declared = node.declared?;
        (!node.entry.disabled && by_id.get(node.entry.id.as_str()) == Some(&index))
            .then_some((index, node.entry, declared))
    })
}

/// The served entry of every provided service (see the module docs),
/// reporting bad `serve` lists and ambiguity.
fn served(
    nodes: &[Node<'_>],
    by_id: &HashMap<&str, usize>,
    providers: &Providers,
    wiring: &[Vec<(ServiceKind, usize)>],
    errors: &mut Vec<ValidationError>,
) -> BTreeMap<ServiceKind, usize> {
    let unwired = |service: ServiceKind| {
        members(nodes, by_id).any(|(index, _, declared)| {
            declared.inject.contains(&service)
                && !wiring[index].iter().any(|(kind, _)| *kind == service)
        })
    };
    let mut served: BTreeMap<ServiceKind, usize> = BTreeMap::new();
    for (index, entry, declared) in members(nodes, by_id) {
        let label = || {
            let mut label = entry.label.clone();
            label.line = entry.serve_line.or(label.line);
            label
        };
        for name in &entry.serve {
            let Some(service) = ServiceKind::from_name(name) else {
                errors.push(ValidationError::ServeUnknownService {
                    entry: label(),
                    service: name.clone(),
                });
                continue;
            };
            if !declared.provides.contains(&service) {
                errors.push(ValidationError::ServeNotProvided {
                    entry: label(),
                    service,
                    plugin: declared.name.to_owned(),
                    provides: declared.provides.to_vec(),
                });
                continue;
            }
            if let Some(first) = served.get(&service) {
                errors.push(ValidationError::ServeConflict {
                    entry: label(),
                    service,
                    first: nodes[*first].entry.label.clone(),
                });
                continue;
            }
            served.insert(service, index);
        }
    }
    // What some entry injects, as (service, provider): one pass over the
    // wiring, not one per provider.
    let consumed: HashSet<(ServiceKind, usize)> = wiring.iter().flatten().copied().collect();
    for service in ServiceKind::known() {
        if served.contains_key(&service) {
            continue;
        }
        let providers = providers.of(service);
        let unconsumed: Vec<usize> = providers
            .iter()
            .copied()
            .filter(|provider| !consumed.contains(&(service, *provider)))
            .collect();
        match (providers, unconsumed.as_slice()) {
            ([], _) => {}
            ([only], _) | (_, [only]) => {
                served.insert(service, *only);
            }
            // Every provider is consumed: nothing is offered outside.
            (_, []) => {}
            // An injection of the service left unwired (already reported)
            // would have consumed one of them: its error is the one to fix.
            (_, _) if unwired(service) => {}
            (_, several) => errors.push(ValidationError::AmbiguousServed {
                entry: nodes[several[0]].entry.label.clone(),
                service,
                candidates: IdList::new(
                    several.iter().map(|index| nodes[*index].entry.id.clone()),
                    several.len(),
                ),
            }),
        }
    }
    served
}

/// Kahn's algorithm over the wired edges, lowest manifest index first among
/// the ready nodes; what cannot be ordered is reported as cycles.
fn topological_order(
    nodes: &[Node<'_>],
    wiring: &[Vec<(ServiceKind, usize)>],
    errors: &mut Vec<ValidationError>,
) -> Vec<usize> {
    let members: Vec<usize> = (0..nodes.len())
        .filter(|index| !nodes[*index].entry.disabled)
        .collect();
    let mut waiting_on: Vec<usize> = vec![0; nodes.len()];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for &index in &members {
        let providers: BTreeSet<usize> = wiring[index].iter().map(|(_, p)| *p).collect();
        waiting_on[index] = providers.len();
        for provider in providers {
            dependents[provider].push(index);
        }
    }
    let mut ready: BTreeSet<usize> = members
        .iter()
        .copied()
        .filter(|index| waiting_on[*index] == 0)
        .collect();
    let mut order = Vec::with_capacity(members.len());
    while let Some(next) = ready.pop_first() {
        order.push(next);
        for &dependent in &dependents[next] {
            waiting_on[dependent] -= 1;
            if waiting_on[dependent] == 0 {
                ready.insert(dependent);
            }
        }
    }
    if order.len() < members.len() {
        report_cycles(nodes, wiring, &waiting_on, errors);
    }
    order
}

/// Every node left unordered waits on another unordered node, so following
/// those edges always ends in a cycle; each distinct cycle is reported once,
/// starting from its lowest-index member. Every walk ends in a cycle it
/// reports or in a node an earlier walk visited (whose cycle is reported),
/// so each node is walked once, however long the chains leading into cycles.
fn report_cycles(
    nodes: &[Node<'_>],
    wiring: &[Vec<(ServiceKind, usize)>],
    waiting_on: &[usize],
    errors: &mut Vec<ValidationError>,
) {
    let stuck = |index: usize| !nodes[index].entry.disabled && waiting_on[index] > 0;
    let mut walked = vec![false; nodes.len()];
    for start in (0..nodes.len()).filter(|index| stuck(*index)) {
        if walked[start] {
            continue;
        }
        walked[start] = true;
        let mut walk = vec![start];
        let mut position: HashMap<usize, usize> = HashMap::from([(start, 0)]);
        let mut current = start;
        while let Some(next) = wiring[current]
            .iter()
            .map(|(_, provider)| *provider)
            .find(|provider| stuck(*provider))
        {
            if let Some(&at) = position.get(&next) {
                // Every member was first walked now: a new cycle.
                let cycle = &walk[at..];
                // Rotate so the lowest manifest index leads.
                let lead = cycle
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, member)| **member)
                    .map(|(offset, _)| offset)
                    .unwrap_or(0);
                let mut path: Vec<String> = cycle[lead..]
                    .iter()
                    .chain(&cycle[..lead])
                    .map(|member| nodes[*member].entry.id.clone())
                    .collect();
                path.push(path[0].clone());
                errors.push(ValidationError::Cycle {
                    entry: nodes[cycle[lead]].entry.label.clone(),
                    path,
                });
                break;
            }
            if walked[next] {
                break;
            }
            walked[next] = true;
            position.insert(next, walk.len());
            walk.push(next);
            current = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{Binding, EntryLabel};

    use ServiceKind::{Fs, Subprocess};

    const E2B: ServiceKind = ServiceKind::Owner(dsh_plugin_api::OwnerKind::E2B);

    struct Spec {
        id: &'static str,
        name: &'static str,
        provides: &'static [ServiceKind],
        inject: &'static [ServiceKind],
        bindings: &'static [(&'static str, &'static str)],
        serve: &'static [&'static str],
        disabled: bool,
        readable: bool,
    }

    const fn spec(
        id: &'static str,
        provides: &'static [ServiceKind],
        inject: &'static [ServiceKind],
    ) -> Spec {
        Spec {
            id,
            name: "dsh-x",
            provides,
            inject,
            bindings: &[],
            serve: &[],
            disabled: false,
            readable: true,
        }
    }

    /// The `index`th entry of a manifest, three lines each.
    fn entry(index: usize, id: String, bindings: &[(&str, String)]) -> Entry {
        Entry {
            label: EntryLabel {
                index,
                id: Some(id.clone()),
                line: Some(index * 3 + 1),
            },
            id,
            name: "dsh-x".to_owned(),
            path: None,
            config: serde_json::Value::Null,
            disabled: false,
            inject: bindings
                .iter()
                .map(|(service, provider)| Binding {
                    service: (*service).to_owned(),
                    provider: provider.clone(),
                })
                .collect(),
            inject_line: None,
            serve: Vec::new(),
            serve_line: None,
        }
    }

    fn entries(specs: &[Spec]) -> Vec<Entry> {
        specs
            .iter()
            .enumerate()
            .map(|(index, spec)| {
                let bindings: Vec<(&str, String)> = spec
                    .bindings
                    .iter()
                    .map(|(service, provider)| (*service, (*provider).to_owned()))
                    .collect();
                Entry {
                    name: spec.name.to_owned(),
                    disabled: spec.disabled,
                    serve: spec
                        .serve
                        .iter()
                        .map(|service| (*service).to_owned())
                        .collect(),
                    ..entry(index, spec.id.to_owned(), &bindings)
                }
            })
            .collect()
    }

    fn run(specs: &[Spec]) -> Result<Plan, Vec<ValidationError>> {
        let entries = entries(specs);
        let nodes: Vec<Node<'_>> = entries
            .iter()
            .zip(specs)
            .map(|(entry, spec)| Node {
                entry,
                declared: (!spec.disabled && spec.readable).then_some(Declared {
                    name: spec.name,
                    provides: spec.provides,
                    inject: spec.inject,
                }),
            })
            .collect();
        plan(&nodes)
    }

    fn messages(specs: &[Spec]) -> Vec<String> {
        run(specs)
            .expect_err("graph should be invalid")
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn providers_come_first_and_manifest_order_breaks_ties() {
        // Written dependents-first, as the seeds do.
        let plan = run(&[
            spec("subprocess", &[Subprocess], &[E2B, Fs]),
            spec("fs", &[Fs], &[E2B]),
            spec("other", &[], &[]),
            spec("e2b", &[E2B], &[]),
        ])
        .expect("valid");
        assert_eq!(plan.order, [2, 3, 1, 0]);
        assert_eq!(plan.wiring[0], [(E2B, 3), (Fs, 1)]);
        assert_eq!(plan.wiring[1], [(E2B, 3)]);
        assert!(plan.wiring[2].is_empty());
    }

    #[test]
    fn bindings_choose_among_several_providers() {
        let mut consumer = spec("consumer", &[], &[Fs]);
        consumer.bindings = &[("fs", "b")];
        let plan = run(&[spec("a", &[Fs], &[]), spec("b", &[Fs], &[]), consumer]).expect("valid");
        assert_eq!(plan.wiring[2], [(Fs, 1)]);
        assert_eq!(plan.order, [0, 1, 2]);
    }

    #[test]
    fn disabled_entries_take_no_part() {
        let mut off = spec("a", &[Fs], &[]);
        off.disabled = true;
        let plan = run(&[off, spec("a", &[Fs], &[]), spec("c", &[], &[Fs])]).expect("valid");
        assert_eq!(plan.order, [1, 2]);
        assert_eq!(plan.wiring[2], [(Fs, 1)]);

        let mut off = spec("only", &[Fs], &[]);
        off.disabled = true;
        let errors = messages(&[off, spec("c", &[], &[Fs])]);
        assert_eq!(
            errors,
            [
                "entry \"c\" (line 4): plugin dsh-x injects fs, but no other enabled entry provides it"
            ]
        );
    }

    #[test]
    fn duplicate_ids_are_reported_with_the_first_use() {
        let errors = messages(&[spec("a", &[], &[]), spec("a", &[], &[])]);
        assert_eq!(
            errors,
            ["entry \"a\" (line 4): duplicate id \"a\" (first used by entry \"a\" (line 1))"]
        );
    }

    #[test]
    fn missing_and_ambiguous_providers_are_reported() {
        let errors = messages(&[
            spec("a", &[Fs], &[]),
            spec("b", &[Fs], &[]),
            spec("c", &[], &[Fs, E2B]),
        ]);
        assert_eq!(
            errors,
            [
                "entry \"c\" (line 7): plugin dsh-x injects fs, which \"a\" and \"b\" provide; choose one with `inject: { fs: <id> }`",
                "entry \"c\" (line 7): plugin dsh-x injects e2b, but no other enabled entry provides it",
            ]
        );
    }

    #[test]
    fn a_plugin_never_provides_to_itself_implicitly() {
        let errors = messages(&[spec("decorator", &[Fs], &[Fs])]);
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].contains("no other enabled entry provides it"),
            "{errors:?}"
        );
        // With a base provider the decorator wraps it.
        let plan =
            run(&[spec("decorator", &[Fs], &[Fs]), spec("base", &[Fs], &[])]).expect("valid");
        assert_eq!(plan.order, [1, 0]);
    }

    #[test]
    fn bad_bindings_are_each_reported() {
        let mut c = spec("c", &[], &[Fs]);
        c.bindings = &[("db", "a"), ("fs", "nobody")];
        let mut d = spec("d", &[], &[Fs]);
        d.bindings = &[("fs", "off")];
        let mut off = spec("off", &[Fs], &[]);
        off.disabled = true;
        let mut e = spec("e", &[], &[Fs]);
        e.bindings = &[("fs", "a"), ("e2b", "a")];
        let errors = messages(&[spec("a", &[Subprocess], &[]), c, d, off, e]);
        assert_eq!(
            errors,
            [
                "entry \"c\" (line 4): inject: unknown service \"db\" (services: fs, subprocess, e2b)",
                "entry \"c\" (line 4): inject: fs is bound to \"nobody\", but no entry has that id",
                "entry \"d\" (line 7): inject: fs is bound to \"off\", which is disabled",
                "entry \"e\" (line 13): inject: fs is bound to \"a\", which does not provide fs (it provides subprocess)",
                "entry \"e\" (line 13): inject: binds e2b, but plugin dsh-x does not inject e2b (it injects fs)",
                "entry \"e\" (line 13): inject: e2b is bound to \"a\", which does not provide e2b (it provides subprocess)",
            ]
        );
    }

    #[test]
    fn the_served_entry_is_the_only_or_the_outermost_provider() {
        let plan = run(&[
            spec("e2b", &[E2B], &[]),
            spec("fs", &[Fs], &[E2B]),
            spec("ro", &[Fs], &[Fs]),
        ])
        .expect("valid");
        assert_eq!(plan.served, BTreeMap::from([(E2B, 0), (Fs, 2)]));
        // Every provider consumed: nothing is served outside.
        let mut a = spec("a", &[], &[Fs]);
        a.bindings = &[("fs", "x")];
        let mut b = spec("b", &[], &[Fs]);
        b.bindings = &[("fs", "y")];
        let plan = run(&[spec("x", &[Fs], &[]), spec("y", &[Fs], &[]), a, b]).expect("valid");
        assert_eq!(plan.served.get(&Fs), None);
    }

    #[test]
    fn several_unconsumed_providers_need_serve() {
        // The case: a decorator over `fs` plus a spare provider.
        let specs = || {
            [
                spec("fs", &[Fs], &[]),
                spec("ro", &[Fs], &[Fs]),
                spec("spare", &[Fs], &[]),
            ]
        };
        let mut ro = spec("ro", &[Fs], &[Fs]);
        ro.bindings = &[("fs", "fs")];
        let [fs, _, spare] = specs();
        assert_eq!(
            messages(&[fs, ro, spare]),
            [
                "entry \"ro\" (line 4): fs is served by \"ro\" and \"spare\" (no other entry consumes them); choose one with `serve: [fs]` on its entry"
            ]
        );
        let mut ro = spec("ro", &[Fs], &[Fs]);
        ro.bindings = &[("fs", "fs")];
        let mut spare = spec("spare", &[Fs], &[]);
        spare.serve = &["fs"];
        let [fs, _, _] = specs();
        let plan = run(&[fs, ro, spare]).expect("valid");
        assert_eq!(plan.served.get(&Fs), Some(&2));
    }

    #[test]
    fn bad_serve_lists_are_each_reported() {
        let mut a = spec("a", &[Fs], &[]);
        a.serve = &["db", "subprocess", "fs"];
        let mut b = spec("b", &[Fs], &[]);
        b.serve = &["fs"];
        assert_eq!(
            messages(&[a, b]),
            [
                "entry \"a\" (line 1): serve: unknown service \"db\" (services: fs, subprocess, e2b)",
                "entry \"a\" (line 1): serve: plugin dsh-x does not provide subprocess (it provides fs)",
                "entry \"b\" (line 4): serve: fs is already served by entry \"a\" (line 1)",
            ]
        );
    }

    #[test]
    fn cycles_are_printed_once_each() {
        let mut a = spec("a", &[Fs], &[Subprocess]);
        a.bindings = &[("subprocess", "b")];
        let b = spec("b", &[Subprocess], &[Fs]);
        let blocked = spec("blocked", &[], &[Fs]);
        let mut selfish = spec("selfish", &[E2B], &[E2B]);
        selfish.bindings = &[("e2b", "selfish")];
        let errors = messages(&[blocked, a, b, selfish]);
        assert_eq!(
            errors,
            [
                "entry \"a\" (line 4): dependency cycle: a -> b -> a",
                "entry \"selfish\" (line 10): dependency cycle: selfish -> selfish",
            ]
        );
    }

    #[test]
    fn unreadable_libraries_do_not_cause_follow_on_errors() {
        let mut unknown = spec("owner", &[E2B], &[]);
        unknown.readable = false;
        // The library error is reported by the loader (which fails the
        // composition); the graph adds no "missing provider" on top.
        let plan = run(&[unknown, spec("fs", &[Fs], &[E2B])]).expect("no graph errors");
        assert!(plan.wiring[1].is_empty());
    }

    /// About `n` entries in each shape whose validation was once quadratic:
    /// decorators each bound to a base of their own (every provider's
    /// "is it consumed" scanned all wiring), consumers left to choose among
    /// two providers (each scanned every entry), and a chain of injections
    /// ending in a cycle (each link walked the rest of the chain).
    fn large_graph(n: usize) -> Vec<(Entry, Declared<'static>)> {
        let declared =
            |provides: &'static [ServiceKind], inject: &'static [ServiceKind]| Declared {
                name: "dsh-x",
                provides,
                inject,
            };
        let third = n / 3;
        let mut nodes = Vec::with_capacity(n);
        let mut push = |id: String, bindings: &[(&str, String)], declared: Declared<'static>| {
            nodes.push((entry(nodes.len(), id, bindings), declared));
        };
        for pair in 0..third / 2 {
            push(format!("base{pair}"), &[], declared(&[Fs], &[]));
            push(
                format!("ro{pair}"),
                &[("fs", format!("base{pair}"))],
                declared(&[Fs], &[Fs]),
            );
        }
        push("run-a".to_owned(), &[], declared(&[Subprocess], &[]));
        push("run-b".to_owned(), &[], declared(&[Subprocess], &[]));
        for consumer in 0..third {
            push(format!("user{consumer}"), &[], declared(&[], &[Subprocess]));
        }
        // link{k} injects e2b from link{k+1}; the last two inject from each other.
        for link in 0..third {
            let next = if link + 1 < third { link + 1 } else { link - 1 };
            push(
                format!("link{link}"),
                &[("e2b", format!("link{next}"))],
                declared(&[E2B], &[E2B]),
            );
        }
        nodes
    }

    fn plan_large(graph: &[(Entry, Declared<'static>)]) -> Vec<ValidationError> {
        let nodes: Vec<Node<'_>> = graph
            .iter()
            .map(|(entry, declared)| Node {
                entry,
                declared: Some(*declared),
            })
            .collect();
        plan(&nodes).expect_err("ambiguous consumers and a cycle")
    }

    /// The CPU time this thread has run: the first field of its schedstat (nanoseconds).
    fn thread_cpu_time() -> std::time::Duration {
        let stat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
        let nanos = stat.split_whitespace().next().and_then(|f| f.parse().ok());
        std::time::Duration::from_nanos(nanos.expect("schedstat's run time"))
    }

    #[test]
    fn validation_time_is_linear_in_entries() {
        // Eight times the entries: linear is 8x, quadratic 64x. Timed in this thread's CPU
        // time, not wall time: on a loaded machine (nextest runs this beside everything else)
        // a long run is preempted more than a short one, and wall time blurred 8x into 26x.
        let small = (5_000, large_graph(5_000));
        let large = (40_000, large_graph(40_000));
        // The least of a few interleaved runs: what the code costs, not
        // what the shared machine's load added to one run.
        let mut best = [std::time::Duration::MAX; 2];
        for _ in 0..5 {
            for ((n, graph), best) in [&small, &large].into_iter().zip(&mut best) {
                let started = thread_cpu_time();
                let errors = plan_large(graph);
                *best = (*best).min(thread_cpu_time() - started);
                // Every consumer is ambiguous, the decorators all unconsumed,
                // the cycle reported once.
                let third = n / 3;
                let kinds = |wanted: fn(&ValidationError) -> bool| {
                    errors.iter().filter(|error| wanted(error)).count()
                };
                assert_eq!(
                    kinds(|e| matches!(e, ValidationError::AmbiguousProvider { .. })),
                    third
                );
                assert_eq!(
                    kinds(|e| matches!(e, ValidationError::AmbiguousServed { .. })),
                    1
                );
                assert_eq!(errors.len(), third + 2);
                let cycle = errors.last().map(ToString::to_string).unwrap_or_default();
                let (a, b) = (third - 2, third - 1);
                assert!(
                    cycle.ends_with(&format!(
                        ": dependency cycle: link{a} -> link{b} -> link{a}"
                    )),
                    "{cycle}"
                );
            }
        }
        let [small, large] = best;
        let ratio = large.as_secs_f64() / small.as_secs_f64();
        // The code this replaced took 12 s at 20,000 entries in release, and
        // over 5 minutes for a test of 20,000 in a debug build. Debug builds,
        // a loaded machine: generous bounds.
        assert!(
            ratio < 20.0 && large < std::time::Duration::from_secs(6),
            "5,000 entries in {small:?}, 40,000 in {large:?} ({ratio:.2}x)"
        );
    }
}
