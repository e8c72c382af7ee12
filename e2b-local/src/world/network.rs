//! Each world's network (docs/design.md §7): a veth pair — `e2bl<id>` on the host, `eth0` in the
//! world's network namespace — with a /30 of the server's address pool (host end `.1`, world end
//! `.2`), a default route through the host end, and `unreachable` routes for what the world may
//! not reach: the rest of the pool (other sandboxes), and its egress rules' denied prefixes
//! (`allowInternetAccess`, `network.allowOut`/`denyOut`, replaced live by `PUT …/network`).
//!
//! Routes, not a packet filter: the world's root lacks `CAP_NET_ADMIN`, so it cannot change them,
//! and e2b-local needs nothing beyond the kernel's rtnetlink. Allowed prefixes win over denied
//! ones exactly: the unreachable set is denied minus allowed, computed as address ranges (`e2b_local_api::egress`), so no
//! longest-prefix match can turn an allowed address away. IPv6 is off on `eth0` (the world has
//! only IPv6 loopback) and on the host end, and the world's `/proc/sys` is read-only, so no IPv6
//! path bypasses the rules and root inside cannot turn it on. Nothing is changed on the host but
//! the host end of each pair (no IPv6, no router advertisements, no forwarding); a pair vanishes
//! with its world's namespace.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::net::Ipv4Addr;
use std::sync::Mutex;

use futures::TryStreamExt;
use rtnetlink::packet_route::link::{InfoData, InfoKind, InfoVeth};
use rtnetlink::packet_route::route::RouteType;
use rtnetlink::{Handle, LinkMessageBuilder, LinkUnspec, RouteMessageBuilder};

use e2b_local_api::egress::subtract;
pub use e2b_local_api::egress::{Cidr, Egress};

/// The default address pool (`serve --sandbox-network`).
pub const DEFAULT_POOL: &str = "10.213.0.0/16";
/// The world's end of its veth pair.
const WORLD_IF: &str = "eth0";
/// The default route's metric: above an `unreachable 0.0.0.0/0` (metric 0), which then wins.
const DEFAULT_ROUTE_METRIC: u32 = 1000;

/// A world's /30 of the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    index: u32,
    /// Which handing-out of the block this is: releasing it twice frees no later holder's.
    generation: u64,
    pub host: Ipv4Addr,
    pub world: Ipv4Addr,
}

/// The server's address pool: /30 blocks handed to worlds, none overlapping a route the host
/// has when it is handed out (another network, or another e2b-local's worlds).
#[derive(Debug)]
pub struct AddressPool {
    pool: Cidr,
    /// Blocks handed out, by index, with their generation; and the next generation.
    used: Mutex<(BTreeMap<u32, u64>, u64)>,
}

impl AddressPool {
    /// A pool of `pool` (at most a /29: two blocks).
    pub fn new(pool: Cidr) -> Result<AddressPool, String> {
        if pool.prefix_len() > 29 {
            return Err(format!(
                "sandbox network {pool} is too small: give at least a /29"
            ));
        }
        Ok(AddressPool {
            pool,
            used: Mutex::new((BTreeMap::new(), 0)),
        })
    }

    /// The lowest free block clear of the host's routes.
    pub fn allocate(&self) -> io::Result<Block> {
        self.allocate_clear_of(&host_routes()?)
    }

    /// The lowest free block overlapping none of `routes`.
    fn allocate_clear_of(&self, routes: &[Cidr]) -> io::Result<Block> {
        let mut guard = self.used.lock().expect("address pool lock");
        let (used, next) = &mut *guard;
        let blocks = 1u64 << (30 - self.pool.prefix_len());
        let first = u32::from(self.pool.addr());
        for index in 0..blocks as u32 {
            let block = Cidr::new(Ipv4Addr::from(first + (index << 2)), 30).expect("30 <= 32");
            if used.contains_key(&index) || routes.iter().any(|r| r.overlaps(&block)) {
                continue;
            }
            *next += 1;
            used.insert(index, *next);
            return Ok(Block {
                index,
                generation: *next,
                host: Ipv4Addr::from(u32::from(block.addr()) + 1),
                world: Ipv4Addr::from(u32::from(block.addr()) + 2),
            });
        }
        Err(io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            format!(
                "no free /30 left in the sandbox network {} (every block is in use or overlaps \
                 a host route; serve --sandbox-network picks another range)",
                self.pool
            ),
        ))
    }

    /// Takes `block` back (once: a second release of the same handing-out does nothing).
    pub fn release(&self, block: Block) {
        let mut guard = self.used.lock().expect("address pool lock");
        if guard.0.get(&block.index) == Some(&block.generation) {
            guard.0.remove(&block.index);
        }
    }
}

/// The host's IPv4 routes other than its default ones, from `/proc/net/route`.
fn host_routes() -> io::Result<Vec<Cidr>> {
    let table = std::fs::read_to_string("/proc/net/route")?;
    Ok(table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // The kernel prints each address's network-order bytes as a native (little-endian)
            // number in hex.
            let address = |i: usize| {
                u32::from_str_radix(fields.get(i)?, 16)
                    .ok()
                    .map(|v| u32::from_be_bytes(v.to_le_bytes()))
            };
            let (dest, mask) = (address(1)?, address(7)?);
            // A route's mask is contiguous: its length says it all.
            (mask != 0)
                .then(|| Cidr::new(Ipv4Addr::from(dest), mask.count_ones() as u8))
                .flatten()
        })
        .collect())
}

/// The host side of every world's network: the pool and a netlink connection in the host's
/// namespace (its task runs on the server's runtime).
#[derive(Debug)]
pub struct Network {
    pub pool: AddressPool,
    host: Handle,
}

fn netlink_error(what: &str, err: impl fmt::Display) -> io::Error {
    io::Error::other(format!("{what}: {err}"))
}

impl Network {
    /// Must be called on a tokio runtime, which then runs the host connection.
    pub fn new(pool: AddressPool) -> io::Result<Network> {
        let (connection, host, _) = rtnetlink::new_connection()?;
        tokio::spawn(connection);
        Ok(Network { pool, host })
    }

    /// The host end's name for world `id`.
    pub fn host_if(id: &str) -> String {
        format!("e2bl{}", &id[..id.len().min(11)])
    }

    /// Gives the world whose namespace process `keeper` is in its veth pair, addresses and
    /// routes. A pair left by an earlier boot of the same world is replaced.
    pub async fn attach(
        &self,
        id: &str,
        keeper: libc::pid_t,
        block: Block,
        egress: &Egress,
    ) -> io::Result<()> {
        let host_if = Self::host_if(id);
        self.detach(id).await;
        let peer = LinkMessageBuilder::<LinkUnspec>::new()
            .name(WORLD_IF.to_owned())
            .setns_by_pid(keeper as u32)
            .build();
        let veth = LinkMessageBuilder::<LinkUnspec>::new_with_info_kind(InfoKind::Veth)
            .name(host_if.clone())
            .set_info_data(InfoData::Veth(InfoVeth::Peer(peer)))
            .build();
        self.host
            .link()
            .add(veth)
            .execute()
            .await
            .map_err(|e| netlink_error(&format!("add veth {host_if}"), e))?;
        let host_index = link_index(&self.host, &host_if).await?;
        // Still down, so it never had an IPv6 address or took an advertisement.
        inert_host_end(&host_if).map_err(|e| netlink_error(&format!("settle {host_if}"), e))?;
        self.host
            .link()
            .set(LinkUnspec::new_with_index(host_index).up().build())
            .execute()
            .await
            .map_err(|e| netlink_error(&format!("set {host_if} up"), e))?;
        self.host
            .address()
            .add(host_index, block.host.into(), 30)
            .execute()
            .await
            .map_err(|e| netlink_error(&format!("address {host_if}"), e))?;

        // Before the link is up, so it never gets an IPv6 address (/proc/sys/net is the opening
        // thread's namespace's).
        super::in_netns(keeper, || {
            match std::fs::write(
                format!("/proc/sys/net/ipv6/conf/{WORLD_IF}/disable_ipv6"),
                "1",
            ) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                done => done,
            }
        })
        .await
        .map_err(|e| netlink_error("disable IPv6 on eth0", e))?;
        let world = in_namespace(keeper).await?;
        let index = link_index(&world, WORLD_IF).await?;
        world
            .address()
            .add(index, block.world.into(), 30)
            .execute()
            .await
            .map_err(|e| netlink_error("address eth0", e))?;
        world
            .link()
            .set(LinkUnspec::new_with_index(index).up().build())
            .execute()
            .await
            .map_err(|e| netlink_error("set eth0 up", e))?;
        world
            .route()
            .add(
                RouteMessageBuilder::<Ipv4Addr>::new()
                    .gateway(block.host)
                    .priority(DEFAULT_ROUTE_METRIC)
                    .build(),
            )
            .execute()
            .await
            .map_err(|e| netlink_error("default route", e))?;
        apply_unreachable(&world, &[], &self.unreachable(block, egress)).await
    }

    /// Replaces the world's egress rules `old` by `new`: the new unreachable routes are added
    /// before the old ones go, so no address is reachable in between that both forbid.
    pub async fn update(
        &self,
        keeper: libc::pid_t,
        block: Block,
        old: &Egress,
        new: &Egress,
    ) -> io::Result<()> {
        let world = in_namespace(keeper).await?;
        apply_unreachable(
            &world,
            &self.unreachable(block, old),
            &self.unreachable(block, new),
        )
        .await
    }

    /// Removes world `id`'s pair if it is still there (its namespace's end removes it too).
    pub async fn detach(&self, id: &str) {
        if let Ok(index) = link_index(&self.host, &Self::host_if(id)).await {
            let _ = self.host.link().del(index).execute().await;
        }
    }

    /// The pool (other sandboxes) and what `egress` denies, as the fewest prefixes. The world's
    /// own /30 is on-link (its connected route is more specific than any of these), so a denied
    /// host end gets a /32 of its own; it stays the default route's next hop all the same.
    fn unreachable(&self, block: Block, egress: &Egress) -> Vec<Cidr> {
        let mut all = egress.unreachable();
        let host = Cidr::new(block.host, 32).expect("a /32");
        let host_denied = all.iter().any(|c| c.overlaps(&host));
        all.push(self.pool.pool);
        let mut unreachable = subtract(&all, &[]);
        if host_denied {
            unreachable.push(host);
        }
        unreachable
    }
}

/// The host's settings for a world's host end `host_if` (this process's network namespace is the
/// host's): no IPv6 at all — no link-local address a world could reach the host's `[::]`
/// listeners through, no router advertisement or address a world could plant — and no IPv4
/// forwarding of what arrives on it, whatever the host's `ip_forward`: a world reaches the host's
/// own addresses and nothing beyond.
fn inert_host_end(host_if: &str) -> io::Result<()> {
    let settings = [
        (format!("/proc/sys/net/ipv6/conf/{host_if}/accept_ra"), "0"),
        (format!("/proc/sys/net/ipv6/conf/{host_if}/autoconf"), "0"),
        (
            format!("/proc/sys/net/ipv6/conf/{host_if}/disable_ipv6"),
            "1",
        ),
        (format!("/proc/sys/net/ipv4/conf/{host_if}/forwarding"), "0"),
    ];
    for (path, value) in settings {
        match std::fs::write(&path, value) {
            // A kernel without IPv6 has no such files, and nothing to turn off.
            Err(e) if e.kind() == io::ErrorKind::NotFound && path.contains("/ipv6/") => {}
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("write {value} to {path}: {e}"),
                ));
            }
            Ok(()) => {}
        }
    }
    Ok(())
}

async fn link_index(handle: &Handle, name: &str) -> io::Result<u32> {
    handle
        .link()
        .get()
        .match_name(name.to_owned())
        .execute()
        .try_next()
        .await
        .map_err(|e| netlink_error(&format!("find link {name}"), e))?
        .map(|link| link.header.index)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no link {name}")))
}

/// Adds the `new` unreachable routes not in `old`, then deletes those of `old` not in `new`.
async fn apply_unreachable(world: &Handle, old: &[Cidr], new: &[Cidr]) -> io::Result<()> {
    let route = |cidr: &Cidr| {
        RouteMessageBuilder::<Ipv4Addr>::new()
            .destination_prefix(cidr.addr(), cidr.prefix_len())
            .kind(RouteType::Unreachable)
            .build()
    };
    for cidr in new.iter().filter(|c| !old.contains(c)) {
        world
            .route()
            .add(route(cidr))
            .execute()
            .await
            .map_err(|e| netlink_error(&format!("unreachable route {cidr}"), e))?;
    }
    for cidr in old.iter().filter(|c| !new.contains(c)) {
        world
            .route()
            .del(route(cidr))
            .execute()
            .await
            .map_err(|e| netlink_error(&format!("remove unreachable route {cidr}"), e))?;
    }
    Ok(())
}

/// A netlink connection in the network namespace of process `keeper`: its socket is made on a
/// thread of its own that enters the namespace and ends (a socket stays in the namespace it
/// was made in); the connection then runs on the current runtime.
async fn in_namespace(keeper: libc::pid_t) -> io::Result<Handle> {
    let runtime = tokio::runtime::Handle::current();
    let (connection, handle, _) = super::in_netns(keeper, move || {
        let _entered = runtime.enter();
        rtnetlink::new_connection()
    })
    .await?;
    tokio::spawn(connection);
    Ok(handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_hand_out_distinct_blocks_and_take_them_back() {
        let pool = AddressPool::new(Cidr::parse("10.99.0.0/29").unwrap()).unwrap();
        let none: &[Cidr] = &[];
        let (a, b) = (
            pool.allocate_clear_of(none).unwrap(),
            pool.allocate_clear_of(none).unwrap(),
        );
        assert_eq!(
            (a.host, a.world),
            ("10.99.0.1".parse().unwrap(), "10.99.0.2".parse().unwrap())
        );
        assert_eq!(b.world, "10.99.0.6".parse::<Ipv4Addr>().unwrap());
        assert!(
            pool.allocate_clear_of(none).is_err(),
            "a /29 holds two blocks"
        );
        pool.release(a);
        let again = pool.allocate_clear_of(none).unwrap();
        assert_eq!((again.host, again.world), (a.host, a.world));
        // A late second release of the first handing-out leaves the new holder's block alone.
        pool.release(a);
        assert!(pool.allocate_clear_of(none).is_err());
        pool.release(again);
        pool.release(b);
        // A block a host route overlaps is skipped.
        let routed = pool
            .allocate_clear_of(&[Cidr::parse("10.99.0.0/30").unwrap()])
            .unwrap();
        assert_eq!(routed.world, "10.99.0.6".parse::<Ipv4Addr>().unwrap());
        assert!(AddressPool::new(Cidr::parse("10.0.0.0/30").unwrap()).is_err());
    }

    #[test]
    fn host_routes_are_read() {
        // Whatever this machine has, each is a proper prefix.
        for route in host_routes().unwrap() {
            assert_eq!(Cidr::new(route.addr(), route.prefix_len()), Some(route));
        }
    }
}
