"""Templates through the official Python SDK's builder: steps (and a Dockerfile) built offline
by e2b-local, sandboxes from the result by name, tag or id, tags, build status, and builds that
cannot succeed failing with the build's error."""

import os
import time

import pytest
from e2b import BuildException, Sandbox, Template, wait_for_port


def unique(what):
    return f"{what}-{os.getpid()}-{os.urandom(3).hex()}"


@pytest.fixture
def names():
    """Template names to delete after the test."""
    made = []
    yield made
    for name in made:
        try:
            Sandbox.delete_snapshot(name)
        except Exception:  # noqa: BLE001 - teardown of a template a test never built
            pass


@pytest.fixture
def from_template(make_sandbox):
    """Sandboxes from a template, killed after the test."""
    return lambda ref: make_sandbox(template=ref)


def test_steps_start_command_and_sandboxes_by_name_tag_and_id(tmp_path, names, from_template):
    (tmp_path / "app.txt").write_text("from python\n")
    name = unique("pytpl")
    names.append(name)
    logs = []
    template = (
        Template(file_context_path=str(tmp_path))
        .from_template("base")
        .copy("app.txt", "/srv/app/")
        .set_envs({"WHO": "$(whoami)"})
        .run_cmd('echo "built by $WHO" > /srv/app/who')
        .set_workdir("/srv/app")
        .set_start_cmd("python3 -m http.server 8124 --bind 127.0.0.1", wait_for_port(8124))
    )
    info = Template.build(template, f"{name}:v1", on_build_logs=lambda e: logs.append(e.message))
    assert info.template_id and info.build_id
    assert any(m.startswith("[3/4] RUN") for m in logs), logs
    assert Template.exists(name)
    assert not Template.exists(unique("never-built"))
    assert Template.exists("base"), "the template every sandbox may start from exists"

    for ref in (f"{name}:v1", name, info.template_id):
        sbx = from_template(ref)
        out = sbx.commands.run(
            "pwd; whoami; cat app.txt who; curl -sf http://127.0.0.1:8124/app.txt"
        ).stdout
        assert out == "/srv/app\nuser\nfrom python\nbuilt by user\nfrom python\n", ref


def test_a_dockerfile_from_e2b_base(names, from_template):
    name = unique("pytpl-docker")
    names.append(name)
    dockerfile = "FROM e2bdev/base\nRUN echo from-docker > /opt/marker\nWORKDIR /opt\n"
    Template.build(Template().from_dockerfile(dockerfile), name)
    sbx = from_template(name)
    # The Dockerfile's steps run as root; the sandbox runs as `user`, in the last WORKDIR.
    assert sbx.commands.run("pwd; whoami; cat marker").stdout == "/opt\nuser\nfrom-docker\n"


def test_tags(names, from_template):
    name = unique("pytpl-tags")
    names.append(name)
    first = Template.build(Template().from_template("base").run_cmd("echo 1 > /tmp/v"), name)
    assigned = Template.assign_tags(name, ["stable"])
    assert str(assigned.build_id) == first.build_id
    tags = sorted((t.tag, str(t.build_id)) for t in Template.get_tags(name))
    assert tags == [("default", first.build_id), ("stable", first.build_id)]
    assert from_template(f"{name}:stable").commands.run("cat /tmp/v").stdout == "1\n"
    Template.remove_tags(name, "stable")
    assert [t.tag for t in Template.get_tags(name)] == ["default"]


def test_failures_are_build_errors(names):
    failing = unique("pytpl-fail")
    names.append(failing)
    with pytest.raises(BuildException, match="exit status 7"):
        Template.build(Template().from_template("base").run_cmd("exit 7"), failing)
    # A step as a user the image lacks: E2B's wording, which E2B's own suite looks for.
    as_nobody = unique("pytpl-user")
    names.append(as_nobody)
    with pytest.raises(BuildException) as unknown_user:
        Template.build(Template().from_template("base").run_cmd("whoami", user="root123"), as_nobody)
    assert (
        "failed to run command 'whoami': command failed: unauthenticated: invalid username: 'root123'"
        in str(unknown_user.value)
    )
    with pytest.raises(BuildException, match="cannot pull image"):
        Template.build(Template().from_ubuntu_image("24.04").run_cmd("true"), unique("pytpl-img"))
    with pytest.raises(BuildException, match="no such template"):
        Template.build(Template().from_template(unique("missing")), unique("pytpl-none"))


def test_build_in_background_and_status(names):
    name = unique("pytpl-bg")
    names.append(name)
    info = Template.build_in_background(
        Template().from_template("base").run_cmd("echo alpha; echo beta"), name
    )
    deadline = time.monotonic() + 60
    while True:
        status = Template.get_build_status(info, logs_offset=0)
        if status.status.value in ("ready", "error") or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert status.status.value == "ready"
    messages = [e.message for e in status.log_entries]
    assert "alpha" in messages and "beta" in messages
