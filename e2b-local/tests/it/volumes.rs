//! Volumes' refusals, as the SDK suites (`volumes.test.mjs`, `test_volumes.py`) do not reach
//! them: bad names and ids, the content API's token and query, mount paths that cannot be
//! mounted — each refused with a clear error, leaving the volume usable.

use http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{Api, Http, LocalServer, Reply, error_of};

/// `method` on the volume content API with `token` (if any).
async fn content(
    server: &LocalServer,
    method: Method,
    path_and_query: &str,
    token: Option<&str>,
    body: &str,
) -> Reply {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/octet-stream")];
    if let Some(bearer) = &bearer {
        headers.push(("authorization", bearer.as_str()));
    }
    Http::default()
        .send(
            method,
            &format!("{}{path_and_query}", server.api_url()),
            &headers,
            body.to_owned(),
        )
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn volumes_refuse_bad_input_and_stay_usable() {
    let server = LocalServer::start();
    let api = Api::new(&server);
    for (body, status, says) in [
        (
            r#"{"name":"has space"}"#,
            StatusCode::BAD_REQUEST,
            "invalid name",
        ),
        (r#"{"name":""}"#, StatusCode::BAD_REQUEST, "invalid name"),
        (r#"{"nom":"x"}"#, StatusCode::BAD_REQUEST, "nom"),
        ("not json", StatusCode::BAD_REQUEST, ""),
    ] {
        let reply = api.call(Method::POST, "/volumes", body).await;
        assert!(error_of(&reply, status).contains(says), "{body}");
    }
    let created = api
        .call(Method::POST, "/volumes", r#"{"name":"data"}"#)
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    let volume: Value = created.json();
    let (id, token) = (
        volume["volumeID"].as_str().unwrap().to_owned(),
        volume["token"].as_str().unwrap().to_owned(),
    );
    let again = api
        .call(Method::POST, "/volumes", r#"{"name":"data"}"#)
        .await;
    assert!(error_of(&again, StatusCode::CONFLICT).contains("already exists"));
    for path in ["/volumes/vol-nope", "/volumes/..%2F..%2Fetc"] {
        error_of(
            &api.call(Method::GET, path, "").await,
            StatusCode::NOT_FOUND,
        );
        error_of(
            &api.call(Method::DELETE, path, "").await,
            StatusCode::NOT_FOUND,
        );
    }
    // The volume API wants the API key; the content API the volume's token, not the key.
    let anonymous = Http::default()
        .send(
            Method::GET,
            &format!("{}/volumes", server.api_url()),
            &[],
            "",
        )
        .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    let file = format!("/volumecontent/{id}/file?path=/a.txt");
    for token in [None, Some("wrong"), Some(server.api_key())] {
        let reply = content(&server, Method::PUT, &file, token, "x").await;
        assert!(error_of(&reply, StatusCode::UNAUTHORIZED).contains("volume token"));
    }
    let unknown = content(
        &server,
        Method::GET,
        "/volumecontent/vol-nope/path?path=/",
        Some(&token),
        "",
    )
    .await;
    error_of(&unknown, StatusCode::NOT_FOUND);
    for (query, says) in [
        ("/path", "path is required"),
        ("/path?path=/&color=red", "unknown query parameter"),
        ("/dir?path=/&depth=65", "invalid depth"),
        ("/dir?path=/&depth=x", "invalid depth"),
        ("/dir?path=/&mode=7", "unknown query parameter"),
        ("/path?path=%00", "NUL"),
    ] {
        let reply = content(
            &server,
            Method::GET,
            &format!("/volumecontent/{id}{query}"),
            Some(&token),
            "",
        )
        .await;
        assert!(
            error_of(&reply, StatusCode::BAD_REQUEST).contains(says),
            "{query}"
        );
    }
    let bad_mode = content(
        &server,
        Method::POST,
        &format!("/volumecontent/{id}/dir?path=/d&mode=99999"),
        Some(&token),
        "",
    )
    .await;
    assert!(error_of(&bad_mode, StatusCode::BAD_REQUEST).contains("invalid mode"));
    let root = content(
        &server,
        Method::DELETE,
        &format!("/volumecontent/{id}/path?path=/.."),
        Some(&token),
        "",
    )
    .await;
    assert!(error_of(&root, StatusCode::BAD_REQUEST).contains("root cannot be removed"));
    let on_dir = content(
        &server,
        Method::GET,
        &format!("/volumecontent/{id}/file?path=/"),
        Some(&token),
        "",
    )
    .await;
    error_of(&on_dir, StatusCode::BAD_REQUEST);

    // Mount paths the world cannot take: refused before a world is built, or by the world's
    // init without following a symlink (`/var/run` links to `/run` on Debian).
    assert!(
        std::fs::symlink_metadata("/var/run")
            .unwrap()
            .file_type()
            .is_symlink(),
        "this test expects the host's /var/run to be a symlink"
    );
    for (path, status, says) in [
        ("/proc/v", StatusCode::BAD_REQUEST, "inside /proc"),
        ("relative", StatusCode::BAD_REQUEST, "invalid path"),
        (
            "/var/run/v",
            StatusCode::INTERNAL_SERVER_ERROR,
            "symlinks are not followed",
        ),
        (
            "/etc/hostname/v",
            StatusCode::INTERNAL_SERVER_ERROR,
            "not a directory",
        ),
    ] {
        let reply = api
            .call(
                Method::POST,
                "/sandboxes",
                &json!({"templateID": "base", "volumeMounts": [{"name": "data", "path": path}]})
                    .to_string(),
            )
            .await;
        let message = error_of(&reply, status);
        assert!(message.contains(says), "{path}: {message}");
    }
    let missing = api
        .call(
            Method::POST,
            "/sandboxes",
            &json!({"templateID": "base", "volumeMounts": [{"name": "nope", "path": "/v"}]})
                .to_string(),
        )
        .await;
    assert!(error_of(&missing, StatusCode::BAD_REQUEST).contains("no volume named \"nope\""));

    // Nothing above holds the volume: it still works and can be destroyed.
    let written = content(&server, Method::PUT, &file, Some(&token), "kept").await;
    assert_eq!(written.status, StatusCode::CREATED);
    let read = content(&server, Method::GET, &file, Some(&token), "").await;
    assert_eq!(&read.body[..], b"kept");
    let gone = api
        .call(Method::DELETE, &format!("/volumes/{id}"), "")
        .await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT);
    assert!(
        !server.state_dir().join("volumes").join(&id).exists(),
        "the volume's files are removed"
    );
    let after = content(&server, Method::GET, &file, Some(&token), "").await;
    error_of(&after, StatusCode::NOT_FOUND);
}
