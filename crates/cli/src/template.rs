//! `dsh template DIR`: an E2B template build context whose sandboxes hold
//! dsh's sandbox helper, so that the E2B providers skip its upload
//! (docs/design.md §6.4, "The helper in a template").
//!
//! dsh writes the context and the recipe; E2B's own `Template()` builder
//! (the JS SDK) builds it — against E2B's cloud, a self-hosted E2B or
//! e2b-local alike — so the build runs on the one implementation of E2B's
//! build protocol that every E2B user already trusts.

use std::path::Path;

use dsh_supervisor_client::{HELPER, HELPER_DIGEST, RUNTIME_ROOT, TEMPLATE_ENTRY, template_path};

use crate::args::TemplateArgs;
use crate::failure::{EXIT_FAILURE, Failure};
use crate::stdout::outln;

/// The recipe's file name in the context.
const RECIPE: &str = "build.mjs";
/// The helper's file name in the context.
const HELPER_FILE: &str = "dsh-supervisor";

/// Writes `DIR/dsh-supervisor` and `DIR/build.mjs` (creating `DIR`), then
/// prints how to build.
pub fn write(args: &TemplateArgs) -> Result<i32, Failure> {
    let dir = &args.dir;
    let fail = |what: &str, path: &Path, err: std::io::Error| {
        Failure::new(
            EXIT_FAILURE,
            format!("template: {what} {}: {err}", path.display()),
        )
    };
    std::fs::create_dir_all(dir).map_err(|err| fail("create", dir, err))?;
    let helper = dir.join(HELPER_FILE);
    std::fs::write(&helper, HELPER).map_err(|err| fail("write", &helper, err))?;
    let recipe = dir.join(RECIPE);
    std::fs::write(&recipe, recipe_text(&args.from)).map_err(|err| fail("write", &recipe, err))?;
    outln!("{}", recipe.display())?;
    eprintln!(
        "dsh: build it with E2B's JS SDK (npm install e2b; E2B_API_KEY, or E2B_API_URL and \
         E2B_DOMAIN for another E2B):\n  node {} NAME\nthen name it in the manifest's e2b entry \
         (config.template: NAME).",
        recipe.display()
    );
    Ok(0)
}

/// The `Template()` builder program: `from` plus the owner's runtime root
/// made as the owner would make it (root's, mode 0700), so that a sandbox's
/// owner finds it ready without a script, holding the helper at its template
/// path, root-owned and writable by root only: inside the runtime root, which
/// the owner verifies before any provider runs, the providers run it with no
/// look of their own. The build ends with the copy's `probe` given its
/// BLAKE3 digest, which fails the build if the copy is not the helper this
/// dsh embeds (damaged on its way into the template): checked once here,
/// the copy is not hashed again at each sandbox's first command.
fn recipe_text(from: &str) -> String {
    let quote = |text: &str| serde_json::Value::from(text).to_string();
    format!(
        r#"// An E2B template with dsh's sandbox helper, written by `dsh template`:
// sandboxes from it start without the helper's upload. Build with E2B's JS SDK
// (npm install e2b; E2B_API_KEY, or E2B_API_URL and E2B_DOMAIN for another E2B):
//   node build.mjs NAME
import {{ dirname }} from 'node:path'
import {{ fileURLToPath }} from 'node:url'
import {{ Template }} from 'e2b'

const name = process.argv[2]
if (!name) {{
  console.error('usage: node build.mjs NAME')
  process.exit(2)
}}
const template = Template({{ fileContextPath: dirname(fileURLToPath(import.meta.url)) }})
  .fromTemplate({from})
  .copy({helper_file}, {path}, {{ user: 'root', mode: 0o755 }})
  .runCmd({fix}, {{ user: 'root' }})
const info = await Template.build(template, name, {{
  onBuildLogs: (entry) => console.error(entry.message),
}})
console.log(info.templateId)
"#,
        from = quote(from),
        helper_file = quote(HELPER_FILE),
        path = quote(&template_path()),
        fix = quote(&format!(
            "chown -R root:root {RUNTIME_ROOT} && chmod 0700 {RUNTIME_ROOT} \
             && chmod -R go-w {RUNTIME_ROOT}/{TEMPLATE_ENTRY} \
             && {copy} probe root - {HELPER_DIGEST} >/dev/null",
            copy = template_path(),
        )),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recipe_quotes_what_it_is_given() {
        let recipe = recipe_text("it's \"mine\"");
        assert!(
            recipe.contains(r#".fromTemplate("it's \"mine\"")"#),
            "{recipe}"
        );
        assert!(
            recipe.contains(&format!("\"{}\"", template_path())),
            "{recipe}"
        );
    }
}
