//! What a worker's sandbox should hold under [`ROOT`]: every directory and file the worker made
//! there through the `fs` seam, with each file's expected content. Operations that completed
//! update it; operations whose `dsh` was killed are reconciled against it (see `ops::files`).

use std::collections::BTreeMap;

use rand::Rng;

use crate::content::Content;

/// The worker's directory, relative to the world's cwd.
pub const ROOT: &str = "data";

/// One entry of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Dir,
    File(Content),
}

/// The expected tree: paths relative to the cwd (`data/…`), [`ROOT`] always present.
#[derive(Debug, Clone)]
pub struct Model {
    nodes: BTreeMap<String, Node>,
    names: u64,
}

impl Default for Model {
    fn default() -> Self {
        Self::new()
    }
}

impl Model {
    /// Just [`ROOT`].
    pub fn new() -> Self {
        Self {
            nodes: BTreeMap::from([(ROOT.to_owned(), Node::Dir)]),
            names: 0,
        }
    }

    pub fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path)
    }

    /// Every file path.
    pub fn files(&self) -> Vec<&str> {
        self.paths(|node| matches!(node, Node::File(_)))
    }

    /// Every file path whose content is text.
    pub fn text_files(&self) -> Vec<&str> {
        self.paths(|node| matches!(node, Node::File(Content::Text(_))))
    }

    /// Every directory path, [`ROOT`] included.
    pub fn dirs(&self) -> Vec<&str> {
        self.paths(|node| matches!(node, Node::Dir))
    }

    fn paths(&self, keep: impl Fn(&Node) -> bool) -> Vec<&str> {
        self.nodes
            .iter()
            .filter(|(_, node)| keep(node))
            .map(|(path, _)| path.as_str())
            .collect()
    }

    /// The entries directly in `dir`: name and node, by name.
    pub fn children(&self, dir: &str) -> Vec<(&str, &Node)> {
        let prefix = format!("{dir}/");
        self.nodes
            .range(prefix.clone()..)
            .take_while(|(path, _)| path.starts_with(&prefix))
            .filter_map(|(path, node)| {
                let name = &path[prefix.len()..];
                (!name.contains('/')).then_some((name, node))
            })
            .collect()
    }

    /// A name not used before in this model: plain, with spaces, non-ASCII, or leading `-`.
    pub fn fresh_name(&mut self, rng: &mut impl Rng) -> String {
        self.names += 1;
        let n = self.names;
        match rng.random_range(0..6) {
            0 => format!("file {n}.txt"),
            1 => format!("é-{n}"),
            2 => format!("-x{n}"),
            3 => format!("n{n}.bin"),
            _ => format!("f{n}"),
        }
    }

    /// Sets the file at `path`; its missing parents become directories.
    pub fn put_file(&mut self, path: &str, content: Content) {
        self.make_parents(path);
        self.nodes.insert(path.to_owned(), Node::File(content));
    }

    /// Adds directory `path` and its missing parents.
    pub fn make_dir(&mut self, path: &str) {
        self.make_parents(path);
        self.nodes.insert(path.to_owned(), Node::Dir);
    }

    fn make_parents(&mut self, path: &str) {
        let mut end = 0;
        while let Some(slash) = path[end..].find('/') {
            end += slash;
            self.nodes
                .entry(path[..end].to_owned())
                .or_insert(Node::Dir);
            end += 1;
        }
    }

    /// Removes `path` and everything under it.
    pub fn remove(&mut self, path: &str) {
        let prefix = format!("{path}/");
        self.nodes
            .retain(|key, _| key != path && !key.starts_with(&prefix));
    }

    /// Moves the file at `from` to `to` (replacing a file there; creating `to`'s parents).
    pub fn rename_file(&mut self, from: &str, to: &str) {
        if let Some(node) = self.nodes.remove(from) {
            self.make_parents(to);
            self.nodes.insert(to.to_owned(), node);
        }
    }

    /// Bytes of every file.
    pub fn bytes(&self) -> usize {
        self.nodes
            .values()
            .map(|node| match node {
                Node::File(content) => content.len(),
                Node::Dir => 0,
            })
            .sum()
    }

    /// Number of entries, [`ROOT`] included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
}

/// The parent directory of a relative path (`data/a/b` → `data/a`).
pub fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(parent, _)| parent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn text(s: &str) -> Content {
        Content::Text(s.to_owned())
    }

    #[test]
    fn files_bring_their_parents_and_children_are_one_level() {
        let mut model = Model::new();
        model.put_file("data/a/b/f", text("x"));
        model.put_file("data/g", text("yz"));
        assert_eq!(model.dirs(), ["data", "data/a", "data/a/b"]);
        let children: Vec<&str> = model.children("data").iter().map(|(n, _)| *n).collect();
        assert_eq!(children, ["a", "g"]);
        assert_eq!(model.children("data/a/b")[0].0, "f");
        assert_eq!(model.bytes(), 3);
    }

    #[test]
    fn a_similar_prefix_is_not_a_child() {
        let mut model = Model::new();
        model.make_dir("data/a");
        model.put_file("data/a b", text(""));
        model.put_file("data/a/x", text(""));
        let children: Vec<&str> = model.children("data/a").iter().map(|(n, _)| *n).collect();
        assert_eq!(children, ["x"]);
        model.remove("data/a");
        assert_eq!(model.files(), ["data/a b"]);
    }

    #[test]
    fn a_rename_replaces_the_target_and_keeps_the_content() {
        let mut model = Model::new();
        model.put_file("data/f", text("one"));
        model.put_file("data/g", text("two"));
        model.rename_file("data/f", "data/new/g");
        model.rename_file("data/g", "data/new/g");
        assert_eq!(model.files(), ["data/new/g"]);
        assert_eq!(model.get("data/new/g"), Some(&Node::File(text("two"))));
        assert_eq!(model.text_files().len(), 1);
    }

    #[test]
    fn fresh_names_never_repeat() {
        let mut model = Model::new();
        let mut rng = StdRng::seed_from_u64(3);
        let names: std::collections::BTreeSet<String> =
            (0..200).map(|_| model.fresh_name(&mut rng)).collect();
        assert_eq!(names.len(), 200);
        assert!(names.iter().all(|name| !name.contains('/')));
    }

    #[test]
    fn parents_of_relative_paths() {
        assert_eq!(parent("data/a/b"), "data/a");
        assert_eq!(parent("data"), "");
    }
}
