//! The `e2b-local` command: `e2b-local serve [...]`, plus hidden subcommands the server runs
//! itself (the per-sandbox init and the namespace probe).

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use e2b_local::server::{ServeConfig, ServerInfo};
use e2b_local::world::cgroup::FreezerKind;
use e2b_local_envd::FileAccess;

#[derive(Parser)]
#[command(
    name = "e2b-local",
    version,
    about = "Offline E2B-compatible sandbox server"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Freezer {
    Auto,
    V1,
    V2,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum EnvdFileAccess {
    AsUser,
    AsRoot,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the E2B control plane and envd front until SIGINT/SIGTERM (needs root).
    Serve {
        /// Address both ports bind to.
        #[arg(long, default_value = "127.0.0.1")]
        host: IpAddr,
        /// Control-plane (E2B API) port; 0 picks a free one.
        #[arg(long, default_value_t = 3000)]
        api_port: u16,
        /// envd front port shared by every sandbox; 0 picks a free one.
        #[arg(long, default_value_t = 49983)]
        envd_port: u16,
        /// API key clients must send (format `e2b_<hex>`); random when omitted.
        #[arg(long)]
        api_key: Option<String>,
        /// Directory for sandbox overlays and private dirs (must not be on overlayfs).
        #[arg(long, default_value = "/var/lib/e2b-local")]
        state_dir: PathBuf,
        /// cgroup freezer used to pause sandboxes: v1 if present, else v2 (auto), or forced.
        #[arg(long, value_enum, default_value_t = Freezer::Auto)]
        freezer: Freezer,
        /// Whose permissions envd's file operations (Stat, ListDir, MakeDir, Move, Remove,
        /// /files download and upload) run with: the requesting user's (as-user, so a request as
        /// `user` cannot read /etc/shadow), or root's whatever the user (as-root, as E2B's envd
        /// does). Either way what they create is owned by the requesting user and commands run as
        /// that user.
        #[arg(long, value_enum, default_value_t = EnvdFileAccess::AsUser)]
        envd_file_access: EnvdFileAccess,
        /// Serve HTTPS on the envd port too (same port), with a certificate for `*.<domain>`
        /// issued by a local CA created once in the state dir (`tls/ca.pem`: trust it).
        #[arg(long)]
        tls: bool,
        /// The domain sandbox hosts are named under (`<port>-<id>.<domain>`): what the TLS
        /// certificate covers, and what to set as `E2B_DOMAIN` and point at this host.
        #[arg(long, default_value = "e2b.local", requires = "tls")]
        domain: String,
        /// The IPv4 range sandbox addresses come from (each sandbox a /30: the host end `.1`,
        /// the sandbox `.2`), or `none` for sandboxes with loopback only. Blocks that overlap a
        /// host route are skipped.
        #[arg(long, default_value = e2b_local::world::network::DEFAULT_POOL, value_parser = parse_sandbox_network)]
        sandbox_network: SandboxNetwork,
    },
    #[command(name = "__sandbox-init", hide = true)]
    SandboxInit,
    #[command(name = "__namespace-probe", hide = true)]
    NamespaceProbe,
}

/// `--sandbox-network`: a range, or none.
#[derive(Debug, Clone, Copy)]
struct SandboxNetwork(Option<e2b_local::world::network::Cidr>);

fn parse_sandbox_network(text: &str) -> Result<SandboxNetwork, String> {
    if text == "none" {
        return Ok(SandboxNetwork(None));
    }
    e2b_local::world::network::Cidr::parse(text)
        .filter(|cidr| cidr.prefix_len() <= 29)
        .map(|cidr| SandboxNetwork(Some(cidr)))
        .ok_or_else(|| format!("{text:?} is not an IPv4 range of at least a /29 (or `none`)"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        // Must run before any thread exists: it forks.
        Command::SandboxInit => ExitCode::from(e2b_local::world::init::run().clamp(0, 255) as u8),
        // Run in a world's namespaces by the preflight: the filter every world gets must install.
        Command::NamespaceProbe => match e2b_local::world::seccomp::install() {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("{err}");
                ExitCode::FAILURE
            }
        },
        Command::Serve {
            host,
            api_port,
            envd_port,
            api_key,
            state_dir,
            freezer,
            envd_file_access,
            tls,
            domain,
            sandbox_network,
        } => {
            // The running binary itself (its inode), not its path: each sandbox's init is this
            // binary re-executed, and a rebuild while the server runs must not change what
            // later sandboxes run (a new build may not speak this server's init protocol).
            let exe = std::path::PathBuf::from("/proc/self/exe");
            serve(ServeConfig {
                host,
                api_port,
                envd_port,
                api_key,
                state_dir,
                exe,
                freezer: match freezer {
                    Freezer::Auto => None,
                    Freezer::V1 => Some(FreezerKind::V1),
                    Freezer::V2 => Some(FreezerKind::V2),
                },
                envd_file_access: match envd_file_access {
                    EnvdFileAccess::AsUser => FileAccess::AsUser,
                    EnvdFileAccess::AsRoot => FileAccess::AsRoot,
                },
                tls_domain: tls.then_some(domain),
                sandbox_network: sandbox_network.0,
            })
        }
    }
}

fn serve(config: ServeConfig) -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "e2b_local=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("e2b-local: start tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        // Installed before anything is printed: a harness may signal as soon as it reads "ready".
        let shutdown =
            shutdown_signal().map_err(|e| format!("e2b-local: install signal handlers: {e}"))?;
        e2b_local::server::serve(config, shutdown, print_environment)
            .await
            .map_err(|e| e.to_string())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{err}");
            ExitCode::FAILURE
        }
    }
}

/// Prints, on stdout, shell `export` lines a person can paste and a harness can parse, then the
/// readiness marker [`e2b_local::harness::READY_MARKER`].
fn print_environment(info: &ServerInfo) {
    for (name, value) in info.env() {
        println!("export {name}={value}");
    }
    if let Some((ca, domain)) = &info.tls {
        let port = info.sandbox_url.rsplit(':').next().unwrap_or_default();
        println!(
            "# TLS on the envd port: trust {ca} (NODE_EXTRA_CA_CERTS, SSL_CERT_FILE, \
             REQUESTS_CA_BUNDLE, or your system's store) and point *.{domain} at this host; \
             then https://<port>-<sandbox id>.{domain}:{port} reaches a port in a sandbox",
            ca = ca.display()
        );
    }
    println!(
        "{} (state dir {})",
        e2b_local::harness::READY_MARKER,
        info.state_dir.display()
    );
}

/// Resolves on SIGINT or SIGTERM. The handlers are registered when this is called, not when the
/// future is first polled.
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    })
}
