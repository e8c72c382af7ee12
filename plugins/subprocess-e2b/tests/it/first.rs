//! A provider's first command in a sandbox whose template holds the helper
//! learns the sandbox itself (docs/design.md §6.3): one process in the
//! sandbox where the install script's probe and then the command were two,
//! and exactly what the provider's later commands — composed on the host
//! from what it learned — see.

use bytes::Bytes;
use dsh_plugin_api::ErrorKind;
use dsh_plugin_api::subprocess::SubprocessProvider;
use dsh_subprocess_e2b::Config;
use dsh_supervisor_client::{HELPER, template_path_in};
use e2b_client::UploadOptions;

use crate::support::wire::Wire;
use crate::support::{RUNTIME_ROOT, World, sh, stdout_of};

const START: &str = "/process.Process/Start";

/// What a command sees of who and where it is: its ids, its cwd, its whole
/// environment.
const SEEN: &str = "id -u; id -G; pwd; env | sort";

/// Puts the helper where a template made by `dsh template` has it: root's,
/// in root-owned directories under the runtime root. (Whether the copy is
/// the helper is the template build's to check: `dsh template`'s recipe,
/// `crates/cli/tests/it/e2b_template.rs`.)
async fn plant_template_copy(world: &World) {
    let bytes = Bytes::from_static(HELPER);
    let upload = format!("{RUNTIME_ROOT}/helper.upload");
    let len = bytes.len() as u64;
    world
        .envd()
        .upload(
            &upload,
            futures::stream::once(async { Ok::<_, std::io::Error>(bytes) }),
            &UploadOptions::default().user("root").content_length(len),
        )
        .await
        .expect("upload the helper");
    let copy = template_path_in(RUNTIME_ROOT);
    let dir = copy.rsplit_once('/').expect("a directory").0;
    let planted = world
        .root(
            r#"install -d -o root -g root -m 0755 -- "$2" && install -o root -g root -m 0755 -- "$1" "$2/dsh-supervisor" && rm -f -- "$1""#,
            &[&upload, dir],
        )
        .await;
    assert!(planted.status.success(), "{}", planted.stderr_text());
}

async fn seen(provider: &dyn SubprocessProvider) -> String {
    let process = provider.spawn(sh(SEEN)).await.expect("spawn");
    let out = String::from_utf8(stdout_of(process.as_ref()).await).expect("utf-8");
    assert!(process.wait().await.expect("wait").success(), "{out}");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_command_learns_the_sandbox_itself_and_sees_what_later_ones_see() {
    let world = World::from_template().await;
    plant_template_copy(&world).await;
    let wire = Wire::new(&world, false);
    let provider = wire.provider(&world);

    let first = seen(&provider).await;
    assert_eq!(wire.count(START), 1, "the command alone, no install script");
    let second = seen(&provider).await;
    assert_eq!(wire.count(START), 2);
    assert_eq!(first, second);
    // What the first command learned is the provider's preparation: what
    // only a prepared provider can do (resolve as the user) starts its one
    // helper process, no install script.
    let sh_path = provider
        .resolve_executable("sh", &[])
        .await
        .expect("resolve");
    assert!(sh_path.ends_with("/sh"), "{sh_path}");
    assert_eq!(wire.count(START), 3, "resolve's helper alone");
    // The user's identity, the world's cwd, the ambient environment
    // scrubbed, the helper's request and the control shell's variables not
    // among it.
    let uid = world.root("id -u user", &[]).await;
    assert!(first.starts_with(&String::from_utf8_lossy(&uid.stdout).to_string()));
    assert!(first.contains("\nPLAIN_AMBIENT=visible\n"), "{first}");
    assert!(first.contains("\nUSER=user\n"), "{first}");
    for hidden in ["OPENAI_API_KEY", "GITHUB_TOKEN", "DSH_", "db_secret"] {
        assert!(!first.contains(hidden), "{hidden} in {first}");
    }

    // A provider that found the sandbox prepared by another means (the
    // install script, without a template copy to run) sees the same.
    let scripted = world.provider();
    world
        .root(
            r#"mv -- "$1" "$1.away""#,
            &[&template_path_in(RUNTIME_ROOT)],
        )
        .await;
    assert_eq!(seen(&scripted).await, first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_command_searches_its_own_path_and_names_it_when_nothing_is_found() {
    let world = World::from_template().await;
    plant_template_copy(&world).await;
    let provider = world.provider();

    let mut spec = sh("echo \"$A:$PATH\"");
    spec.env.insert("A".into(), "explicit".into());
    spec.env
        .insert("PATH".into(), "/opt/none:/usr/bin:/bin".into());
    let process = provider.spawn(spec).await.expect("spawn");
    let out = String::from_utf8(stdout_of(process.as_ref()).await).expect("utf-8");
    assert_eq!(out, "explicit:/opt/none:/usr/bin:/bin\n");

    // A first command that cannot start says where it looked, and what it
    // learned before that still prepares the provider: the next command
    // starts alone.
    let wire = Wire::new(&world, false);
    let fresh = wire.provider(&world);
    let err = match fresh
        .spawn(dsh_plugin_api::subprocess::SpawnSpec::new([
            "no-such-program-anywhere",
        ]))
        .await
    {
        Ok(_) => panic!("a program nowhere on PATH started"),
        Err(err) => err,
    };
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains("/usr/bin"), "{err}");
    assert_eq!(wire.count(START), 1);
    assert!(seen(&fresh).await.contains("\nUSER=user\n"));
    assert_eq!(
        wire.count(START),
        2,
        "no install script after the failed start"
    );
}

/// From `base`, which never holds the copy, a first command does not try
/// it: the install script looks for it once (beside its start), then the
/// command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_base_the_copy_is_not_tried_and_looked_for_once() {
    let world = World::start().await;
    let wire = Wire::new(&world, false);
    let provider = wire.provider(&world);
    assert!(seen(&provider).await.contains("\nUSER=user\n"));
    assert_eq!(
        wire.count("/filesystem.Filesystem/Stat"),
        2,
        "the copy and its directory, once"
    );
    assert_eq!(wire.count(START), 2, "the install script, then the command");
}

/// From a template without the copy (one made another way, or for another
/// build of dsh), the first command's start of it ends as a missing
/// program's does: nothing ran, and the command starts as in a sandbox from
/// `base`, the install script told there is no copy (no look for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_a_template_without_the_copy_one_start_finds_it_missing() {
    let world = World::from_template().await;
    let wire = Wire::new(&world, false);
    let provider = wire.provider(&world);
    assert!(seen(&provider).await.contains("\nUSER=user\n"));
    assert_eq!(
        wire.count(START),
        3,
        "the copy's start, the install script, the command"
    );
    assert_eq!(wire.count("/filesystem.Filesystem/Stat"), 0, "no look");
    assert!(seen(&provider).await.contains("\nUSER=user\n"));
    assert_eq!(wire.count(START), 4, "the command alone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_command_for_a_user_the_sandbox_lacks_is_refused_clearly() {
    let world = World::from_template().await;
    plant_template_copy(&world).await;
    let provider = world.provider_with(&Config {
        user: Some("nosuchuser".into()),
        ..Config::default()
    });
    let marker = "/tmp/first-ran";
    let err = match provider.spawn(sh(&format!(": > {marker}"))).await {
        Ok(_) => panic!("a command started for a user the sandbox lacks"),
        Err(err) => err,
    };
    assert!(err.to_string().contains("no user nosuchuser"), "{err}");
    let ran = world.root(r#"test -e "$1""#, &[marker]).await;
    assert!(!ran.status.success(), "the command did not run");
}
