//! Random identifiers in envd's alphabet (the one E2B uses for sandbox ids).

use rand::Rng as _;

const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz1234567890";

/// A polling-watcher id: `w` followed by 20 random `[a-z0-9]` characters.
pub(crate) fn watcher_id() -> String {
    let mut rng = rand::rng();
    let mut id = String::with_capacity(21);
    id.push('w');
    for _ in 0..20 {
        id.push(char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]));
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watcher_ids_have_envds_shape() {
        let id = watcher_id();
        assert_eq!(id.len(), 21);
        assert!(id.starts_with('w'));
        assert!(id[1..].bytes().all(|b| ALPHABET.contains(&b)));
        assert_ne!(watcher_id(), watcher_id());
    }
}
