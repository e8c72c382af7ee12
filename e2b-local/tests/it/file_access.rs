//! Whose permissions envd's file operations run with, through a real server: the requesting
//! user's by default (e2b-local's departure from E2B's envd, issue 9), root's whatever the user
//! with `serve --envd-file-access as-root` (E2B's envd). Either way what a user's request creates
//! is that user's, and commands run as the user.

use connectrpc::ErrorCode;
use envd_proto::filesystem::{ListDirRequest, MakeDirRequest};
use http::{Method, StatusCode};

use crate::common::{self, Api, Http, LocalServer, exec, unique};

/// By default a request as `user` can neither download `/etc/shadow`, list `/root` nor write in
/// `/etc`, though the same requests as root are served.
#[tokio::test(flavor = "multi_thread")]
async fn a_users_file_operations_have_the_users_permissions_by_default() {
    file_operations_as_user(LocalServer::start(), false).await;
}

/// `--envd-file-access as-root` serves the same requests as `user`, as E2B's envd does; what
/// they create still belongs to `user`, and commands still run as `user`.
#[tokio::test(flavor = "multi_thread")]
async fn envd_file_access_as_root_serves_any_user_as_root() {
    let server = LocalServer::start_with_args(&["--envd-file-access", "as-root"]);
    file_operations_as_user(server, true).await;
}

/// `as_root`: whether the server runs with `--envd-file-access as-root`.
async fn file_operations_as_user(server: LocalServer, as_root: bool) {
    let api = Api::new(&server);
    let id = api.sandbox().await;
    let http = Http::default();
    let marker = unique("root-only");
    let made = exec(
        &server,
        &id,
        Some("root"),
        &format!("touch /root/{marker} && stat -c %a /root /etc/shadow"),
    )
    .await;
    assert_eq!(made.stdout, "700\n640\n", "{made:?}");
    let files = |path: &str, user: &str| {
        format!("{}/files?path={path}&username={user}", server.sandbox_url())
    };
    let routed = [("e2b-sandbox-id", id.as_str())];

    // GET /files of a root-only file. (Bodies are compared, never printed.)
    let by_root = http
        .send(Method::GET, &files("/etc/shadow", "root"), &routed, "")
        .await;
    assert_eq!(by_root.status, StatusCode::OK);
    let by_user = http
        .send(Method::GET, &files("/etc/shadow", "user"), &routed, "")
        .await;
    if as_root {
        assert_eq!(by_user.status, StatusCode::OK);
        assert!(
            by_user.body == by_root.body,
            "user's download of /etc/shadow differs from root's"
        );
    } else {
        assert_eq!(
            by_user.status,
            StatusCode::FORBIDDEN,
            "{}",
            String::from_utf8_lossy(&by_user.body)
        );
        assert_eq!(by_user.json()["code"], 403);
    }

    // ListDir of a root-only directory.
    let list = |user: &'static str| {
        let fs = common::filesystem(&server, &id, Some(user));
        async move {
            fs.list_dir(ListDirRequest {
                path: "/root".to_owned(),
                depth: 1,
                ..Default::default()
            })
            .await
            .map(|response| {
                response
                    .into_owned()
                    .entries
                    .into_iter()
                    .map(|entry| entry.name)
                    .collect::<Vec<_>>()
            })
        }
    };
    let names = list("root").await.expect("root lists /root");
    assert!(names.contains(&marker), "{names:?}");
    match list("user").await {
        Ok(names) if as_root => assert!(names.contains(&marker), "{names:?}"),
        Err(err) if !as_root => assert_eq!(err.code, ErrorCode::PermissionDenied, "{err:?}"),
        other => panic!("ListDir /root as user: {other:?}"),
    }

    // Creating where only root may write: an upload and a MakeDir in /etc.
    let uploaded = format!("/etc/{marker}");
    let upload = http
        .send(
            Method::POST,
            &files(&uploaded, "user"),
            &[routed[0], ("content-type", "application/octet-stream")],
            "written by user",
        )
        .await;
    let made_dir = common::filesystem(&server, &id, Some("user"))
        .make_dir(MakeDirRequest {
            path: format!("/etc/{marker}.d"),
            ..Default::default()
        })
        .await;
    let owners = exec(
        &server,
        &id,
        Some("root"),
        &format!("stat -c %U:%G {uploaded} {uploaded}.d 2>&1; cat {uploaded} 2>&1; echo"),
    )
    .await;
    if as_root {
        assert_eq!(
            upload.status,
            StatusCode::OK,
            "{}",
            String::from_utf8_lossy(&upload.body)
        );
        made_dir.expect("MakeDir in /etc as user");
        // Created as root, then given to the requesting user, as envd does.
        assert_eq!(owners.stdout, "user:user\nuser:user\nwritten by user\n");
    } else {
        assert_eq!(
            upload.status,
            StatusCode::FORBIDDEN,
            "{}",
            String::from_utf8_lossy(&upload.body)
        );
        let err = made_dir.expect_err("MakeDir in /etc as user");
        assert_eq!(err.code, ErrorCode::PermissionDenied, "{err:?}");
        assert!(
            !owners.stdout.contains("user:user"),
            "nothing was created: {owners:?}"
        );
    }

    // Commands run as the user in both modes.
    let command = exec(
        &server,
        &id,
        None,
        "whoami; cat /etc/shadow >/dev/null 2>&1; echo $?",
    )
    .await;
    assert_eq!(command.stdout, "user\n1\n", "{command:?}");
}
