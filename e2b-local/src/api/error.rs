//! Control-plane errors: the `e2b-local-api` crate's [`ApiError`], an axum response here (a JSON
//! `{"code": <status>, "message": "…"}` body whose `code` equals the HTTP status).

pub use e2b_local_api::error::ApiError;
