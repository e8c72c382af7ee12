//! Root inside a world against the host's kernel (docs/design.md §7, "Sandbox root is not host
//! root"): `root_probes.py`, run as root through the sandbox's sudo and in a template's `RUN`
//! step, tries the host-wide settings under `/proc/sys` (`core_pattern`, `modprobe`, the host
//! name, `drop_caches`), SysRq, `uevent_helper`, turning IPv6 on to reach a host `[::]` listener,
//! the upper layer's host path in `mountinfo`, new namespaces, `mount`, `sethostname`, the
//! keyring and `bpf` — every one must be refused — while ordinary work (sudo writing under
//! `/usr`, `ping` on loopback, a server reached through the front) goes on.

use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::json;

use crate::common::{Api, Http, LocalServer, exec, unique};

const PROBES: &str = include_str!("root_probes.py");
/// One line per probe of `root_probes.py`.
const PROBE_COUNT: usize = 16;

/// The shell command that runs the probes with `args` (as whoever runs the command).
fn probe_command(prefix: &str, args: &str) -> String {
    format!(
        "cat > /tmp/root_probes.py <<'PROBES'\n{PROBES}\nPROBES\n{prefix}python3 /tmp/root_probes.py {args}"
    )
}

/// Asserts that every probe's line says refused.
fn assert_all_refused(output: &str, context: &str) {
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines.len(), PROBE_COUNT, "{context}: {output}");
    let allowed: Vec<&&str> = lines.iter().filter(|l| !l.contains(" refused (")).collect();
    assert!(allowed.is_empty(), "{context}: allowed: {allowed:#?}");
}

/// The IPv6 addresses the host has on world `id`'s host end (`/proc/net/if_inet6`).
fn host_end_ipv6(id: &str) -> Vec<String> {
    let host_if = format!("e2bl{}", &id[..id.len().min(11)]);
    let table = std::fs::read_to_string("/proc/net/if_inet6").unwrap_or_default();
    table
        .lines()
        .filter(|line| line.split_whitespace().last() == Some(host_if.as_str()))
        .map(|line| {
            let hex = line.split_whitespace().next().expect("address column");
            let groups: Vec<&str> = (0..8).map(|i| &hex[i * 4..i * 4 + 4]).collect();
            groups.join(":")
        })
        .collect()
}

fn host_sysctl(path: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/{path}"))
        .unwrap_or_else(|e| panic!("read /proc/sys/{path} on the host: {e}"))
        .trim()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn root_inside_cannot_reach_the_host_through_its_kernel() {
    let listener = std::net::TcpListener::bind("[::]:0").expect("a host [::] listener");
    let port = listener.local_addr().unwrap().port();
    let server = LocalServer::start();
    let api = Api::new(&server);
    let id = api.sandbox().await;

    let host_if = format!("e2bl{}", &id[..id.len().min(11)]);
    for (setting, expected) in [
        (format!("net/ipv6/conf/{host_if}/disable_ipv6"), "1"),
        (format!("net/ipv6/conf/{host_if}/accept_ra"), "0"),
        (format!("net/ipv4/conf/{host_if}/forwarding"), "0"),
    ] {
        assert_eq!(host_sysctl(&setting), expected, "the host's {setting}");
    }
    let addresses = host_end_ipv6(&id);
    assert!(
        addresses.is_empty(),
        "the host end has IPv6 addresses: {addresses:?}"
    );

    let upper = server.state_dir().join("sandboxes").join(&id).join("upper");
    let args = format!("{} {port} {}", upper.display(), addresses.join(" "));
    let probed = exec(&server, &id, None, &probe_command("sudo -n ", &args)).await;
    assert_eq!(probed.exit_code, 0, "the probes ran: {probed:?}");
    assert_all_refused(&probed.stdout, "root through sudo in a sandbox");

    let host_name = host_sysctl("kernel/hostname");
    let named = exec(&server, &id, None, "hostname; cat /etc/hostname").await;
    assert_eq!(named.stdout, format!("{id}\n{id}\n"), "{named:?}");
    assert_ne!(id, host_name);
    drop(listener);
}

/// What root and `user` do every day still works under the confinement: sudo writes under
/// `/usr`, `ping` on loopback (a raw or ICMP socket), and a server inside reached through the
/// front.
#[tokio::test(flavor = "multi_thread")]
async fn ordinary_work_goes_on_under_the_confinement() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let id = api.sandbox().await;
    let name = unique("confined");
    let script = format!(
        "sudo -n sh -c 'echo ok > /usr/local/share/{name}' && cat /usr/local/share/{name} && \
         ping -c 1 -W 5 127.0.0.1 >/dev/null && echo ping-ok && \
         (setsid python3 -m http.server 8765 --bind 0.0.0.0 >/dev/null 2>&1 &) && \
         for i in $(seq 100); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8765))' 2>/dev/null && echo served && exit 0; sleep 0.1; done; exit 1"
    );
    let started = tokio::time::Instant::now();
    let worked = exec(&server, &id, None, &script).await;
    assert_eq!(worked.stdout, "ok\nping-ok\nserved\n", "{worked:?}");
    // sudo resolves the world's host name from its /etc/hosts, not by waiting on DNS.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    let reply = Http::default()
        .send(
            Method::GET,
            &format!("{}/", server.sandbox_url()),
            &[("e2b-sandbox-id", &id), ("e2b-sandbox-port", "8765")],
            "",
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(
        !std::path::Path::new("/usr/local/share")
            .join(&name)
            .exists(),
        "the write reached the host"
    );
}

/// A template's `RUN` step runs as root in a build world confined as every sandbox: the probes'
/// findings, kept in the template's files, are read back from a sandbox made from it.
#[tokio::test(flavor = "multi_thread")]
async fn a_template_build_step_is_confined_as_a_sandbox_is() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let reply = api
        .call(
            Method::POST,
            "/v3/templates",
            &json!({"name": unique("confined")}).to_string(),
        )
        .await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{:?}", reply.json());
    let body = reply.json();
    let (template, build) = (
        body["templateID"].as_str().unwrap().to_owned(),
        body["buildID"].as_str().unwrap().to_owned(),
    );
    // The build world's id is not known here: the probe looks for any host path of a layer.
    let run = probe_command("", "- 0 > /probes.txt 2>&1");
    let steps = json!({"fromTemplate": "base", "steps": [{"type": "RUN", "args": [run, "root"]}]});
    let started = api
        .call(
            Method::POST,
            &format!("/v2/templates/{template}/builds/{build}"),
            &steps.to_string(),
        )
        .await;
    assert_eq!(started.status, StatusCode::ACCEPTED);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let status = api
            .call(
                Method::GET,
                &format!("/templates/{template}/builds/{build}/status"),
                "",
            )
            .await
            .json();
        match status["status"].as_str() {
            Some("ready") => break,
            Some("error") => panic!("the build failed: {status}"),
            _ => {}
        }
        assert!(tokio::time::Instant::now() < deadline, "build: {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let created = api.create(json!({"templateID": template})).await;
    let id = created["sandboxID"].as_str().expect("sandboxID");
    let found = exec(&server, id, None, "cat /probes.txt").await;
    assert_all_refused(&found.stdout, "root in a template's RUN step");
}

/// A world's init writes the world's `/etc` (its `user`, sudoers, host name) at every boot,
/// files-only reboots and worlds made from snapshots included; root inside may have made those
/// files symlinks to host paths, which the init — the host's root — must never follow. (The
/// baits are new files under the host's `/var/tmp`: were they followed, nothing of the host's
/// would be overwritten.)
#[tokio::test(flavor = "multi_thread")]
async fn symlinks_a_world_leaves_in_etc_never_lead_its_init_to_the_host() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    let id = api.sandbox().await;
    let bait = std::path::PathBuf::from("/var/tmp").join(unique("bait"));
    let bait = bait.display();
    let planted = exec(
        &server,
        &id,
        Some("root"),
        &format!(
            "ln -sf {bait}-sudoers /etc/sudoers.d/e2b-local-user && \
             ln -sf {bait}-hostname /etc/hostname && cp /etc/hosts {bait}-hosts && \
             ln -sf {bait}-hosts /etc/hosts && echo planted"
        ),
    )
    .await;
    assert_eq!(planted.stdout, "planted\n", "{planted:?}");
    let resumed = api.reboot(&id).await;
    let leaked: Vec<String> = ["sudoers", "hostname", "hosts"]
        .iter()
        .map(|name| format!("{bait}-{name}"))
        .filter(|path| std::path::Path::new(path).exists())
        .collect();
    for path in &leaked {
        let _ = std::fs::remove_file(path);
    }
    assert!(leaked.is_empty(), "the init wrote host files: {leaked:?}");
    assert_eq!(resumed, StatusCode::CREATED, "the world rebooted");
    // What was written went where the symlinks lead inside the world.
    let inside = exec(
        &server,
        &id,
        Some("root"),
        &format!("cat {bait}-sudoers {bait}-hostname; grep -c {id} {bait}-hosts"),
    )
    .await;
    assert_eq!(
        inside.stdout,
        format!("user ALL=(ALL:ALL) NOPASSWD: ALL\n{id}\n1\n"),
        "{inside:?}"
    );
}
