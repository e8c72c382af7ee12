//! Content-coding negotiation for `/files` as envd does it: `Accept-Encoding` with quality values
//! for downloads (gzip or identity; 406 when neither is acceptable) and `Content-Encoding` of
//! upload bodies (gzip or identity; anything else is refused).

use http::HeaderMap;

/// A coding the daemon can produce or consume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Coding {
    Identity,
    Gzip,
}

struct Weighted {
    coding: String,
    quality: f64,
}

fn parse_weighted(value: &str) -> Weighted {
    let mut parts = value.split(';');
    let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let mut quality = 1.0;
    for param in parts {
        let param = param.trim();
        if let Some(q) = param
            .strip_prefix("q=")
            .or_else(|| param.strip_prefix("Q="))
            && let Ok(q) = q.trim().parse::<f64>()
        {
            quality = q;
        }
    }
    Weighted { coding, quality }
}

fn accept_encoding(headers: &HeaderMap) -> Option<String> {
    let values: Vec<&str> = headers
        .get_all(http::header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .collect();
    (!values.is_empty()).then(|| values.join(","))
}

/// Parses the header into codings and whether identity was refused (explicitly with `q=0`, or
/// through `*;q=0` without an explicit identity).
fn parse_accept(header: &str) -> (Vec<Weighted>, bool) {
    let codings: Vec<Weighted> = header
        .split(',')
        .filter(|part| !part.trim().is_empty())
        .map(parse_weighted)
        .collect();
    let mut identity_rejected = false;
    let mut identity_accepted = false;
    let mut wildcard_rejected = false;
    for coding in &codings {
        match coding.coding.as_str() {
            "identity" if coding.quality == 0.0 => identity_rejected = true,
            "identity" => identity_accepted = true,
            "*" if coding.quality == 0.0 => wildcard_rejected = true,
            _ => {}
        }
    }
    if wildcard_rejected && !identity_accepted {
        identity_rejected = true;
    }
    (codings, identity_rejected)
}

/// True unless the client refused an uncompressed response.
pub(crate) fn identity_acceptable(headers: &HeaderMap) -> bool {
    match accept_encoding(headers) {
        None => true,
        Some(header) if header.trim().is_empty() => true,
        Some(header) => !parse_accept(&header).1,
    }
}

/// The coding to send a download in, or the 406 message when none is acceptable.
pub(crate) fn negotiate_download(headers: &HeaderMap) -> Result<Coding, String> {
    let Some(header) = accept_encoding(headers) else {
        return Ok(Coding::Identity);
    };
    if header.trim().is_empty() {
        return Ok(Coding::Identity);
    }
    let (mut codings, identity_rejected) = parse_accept(&header);
    codings.sort_by(|a, b| b.quality.total_cmp(&a.quality));
    for coding in &codings {
        if coding.quality == 0.0 {
            continue;
        }
        match coding.coding.as_str() {
            "identity" => return Ok(Coding::Identity),
            "*" => {
                return Ok(if identity_rejected {
                    Coding::Gzip
                } else {
                    Coding::Identity
                });
            }
            "gzip" => return Ok(Coding::Gzip),
            _ => {}
        }
    }
    if identity_rejected {
        Err(format!(
            "error parsing Accept-Encoding: no acceptable encoding found, supported: [gzip] (Accept-Encoding: {header})"
        ))
    } else {
        Ok(Coding::Identity)
    }
}

/// The coding of an upload body, or the 400 message for an unsupported one.
pub(crate) fn upload_coding(headers: &HeaderMap) -> Result<Coding, String> {
    let Some(value) = headers.get(http::header::CONTENT_ENCODING) else {
        return Ok(Coding::Identity);
    };
    let text = value.to_str().unwrap_or("");
    match parse_weighted(text).coding.as_str() {
        "" | "identity" => Ok(Coding::Identity),
        "gzip" => Ok(Coding::Gzip),
        _ => Err(format!(
            "error decompressing request body: unsupported Content-Encoding: {text}, supported: [gzip]"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(accept: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::ACCEPT_ENCODING, accept.parse().unwrap());
        headers
    }

    #[test]
    fn download_negotiation() {
        assert_eq!(negotiate_download(&HeaderMap::new()), Ok(Coding::Identity));
        assert_eq!(
            negotiate_download(&headers("gzip, deflate")),
            Ok(Coding::Gzip)
        );
        assert_eq!(negotiate_download(&headers("br")), Ok(Coding::Identity));
        assert_eq!(
            negotiate_download(&headers("identity;q=1, gzip;q=0.5")),
            Ok(Coding::Identity)
        );
        assert_eq!(negotiate_download(&headers("*")), Ok(Coding::Identity));
        assert_eq!(
            negotiate_download(&headers("*, identity;q=0")),
            Ok(Coding::Gzip)
        );
        assert!(negotiate_download(&headers("br, identity;q=0")).is_err());
        assert!(negotiate_download(&headers("br, *;q=0")).is_err());
        assert!(!identity_acceptable(&headers("*;q=0")));
        assert!(identity_acceptable(&headers("gzip")));
    }

    #[test]
    fn upload_codings() {
        let mut headers = HeaderMap::new();
        assert_eq!(upload_coding(&headers), Ok(Coding::Identity));
        headers.insert(http::header::CONTENT_ENCODING, "GZIP".parse().unwrap());
        assert_eq!(upload_coding(&headers), Ok(Coding::Gzip));
        headers.insert(http::header::CONTENT_ENCODING, "br".parse().unwrap());
        assert!(
            upload_coding(&headers)
                .unwrap_err()
                .contains("unsupported Content-Encoding: br")
        );
    }
}
