//! Runs the daemon on its own, outside any sandbox, for poking at it with the official SDKs in
//! debug mode (`E2B_DEBUG=true` makes them talk to `localhost:49983` without a control plane).
//!
//! ```text
//! cargo run -p e2b-local-envd --example serve -- [--listen 127.0.0.1:49983 | --unix PATH]
//!     [--user root] [--workdir DIR] [--token TOKEN] [--env NAME=VALUE]...
//! ```
//!
//! Commands run on the host as the chosen user; stop it with Ctrl-C or SIGTERM (every process it
//! started is killed).

use std::collections::BTreeMap;

use e2b_local_envd::{EnvdConfig, EnvdListener, serve};

fn usage(problem: &str) -> ! {
    eprintln!(
        "serve: {problem}\nusage: serve [--listen ADDR | --unix PATH] [--user NAME] [--workdir DIR] [--token TOKEN] [--env NAME=VALUE]..."
    );
    std::process::exit(2)
}

#[tokio::main]
async fn main() {
    let mut listen = "127.0.0.1:49983".to_owned();
    let mut unix = None;
    let mut config = EnvdConfig {
        sandbox_id: "debug_sandbox_id".to_owned(),
        template_id: "base".to_owned(),
        env_vars: BTreeMap::new(),
        access_token: None,
        default_user: "root".to_owned(),
        default_workdir: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--listen" => listen = value(),
            "--unix" => unix = Some(value()),
            "--user" => config.default_user = value(),
            "--workdir" => config.default_workdir = Some(value().into()),
            "--token" => config.access_token = Some(value()),
            "--env" => {
                let pair = value();
                let (name, value) = pair
                    .split_once('=')
                    .unwrap_or_else(|| usage(&format!("--env {pair}: expected NAME=VALUE")));
                config.env_vars.insert(name.to_owned(), value.to_owned());
            }
            other => usage(&format!("unknown argument {other}")),
        }
    }
    let listener = match unix {
        Some(path) => EnvdListener::Unix(
            tokio::net::UnixListener::bind(&path)
                .unwrap_or_else(|err| usage(&format!("bind {path}: {err}"))),
        ),
        None => EnvdListener::Tcp(
            tokio::net::TcpListener::bind(&listen)
                .await
                .unwrap_or_else(|err| usage(&format!("bind {listen}: {err}"))),
        ),
    };
    eprintln!("envd {} serving", e2b_local_envd::ENVD_VERSION);
    let shutdown = async {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .unwrap_or_else(|err| usage(&format!("SIGTERM handler: {err}")));
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
    };
    if let Err(err) = serve(config, listener, shutdown).await {
        eprintln!("serve: {err}");
        std::process::exit(1);
    }
}
