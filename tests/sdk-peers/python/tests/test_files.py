import pytest
from e2b import FileNotFoundException
from e2b.sandbox.filesystem.filesystem import WriteEntry

from conftest import eventually


def test_text_bytes_empty(sbx):
    info = sbx.files.write("hello.txt", "hello ünïcode\n")
    assert info.path == "/home/user/hello.txt"
    assert sbx.files.read("/home/user/hello.txt") == "hello ünïcode\n"
    data = bytes(range(256))
    sbx.files.write("/tmp/bytes.bin", data)
    assert bytes(sbx.files.read("/tmp/bytes.bin", format="bytes")) == data
    sbx.files.write("/tmp/empty", "")
    assert sbx.files.read("/tmp/empty") == ""
    with pytest.raises(FileNotFoundException):
        sbx.files.read("/tmp/missing")


def test_ten_mib(sbx):
    big = bytes((i * 7) % 251 for i in range(10 * 1024 * 1024))
    sbx.files.write("/tmp/big.bin", big)
    assert bytes(sbx.files.read("/tmp/big.bin", format="bytes")) == big


def test_multi_write_list_exists_info(sbx):
    written = sbx.files.write_files(
        [WriteEntry(path="/tmp/tree/a.txt", data="a"), WriteEntry(path="/tmp/tree/sub/b.txt", data="b")]
    )
    assert [w.path for w in written] == ["/tmp/tree/a.txt", "/tmp/tree/sub/b.txt"]
    assert sorted(e.name for e in sbx.files.list("/tmp/tree")) == ["a.txt", "sub"]
    deep = sorted(e.path for e in sbx.files.list("/tmp/tree", depth=2))
    assert deep == ["/tmp/tree/a.txt", "/tmp/tree/sub", "/tmp/tree/sub/b.txt"]
    assert sbx.files.exists("/tmp/tree/a.txt")
    assert not sbx.files.exists("/tmp/tree/nope")
    sbx.files.write("/home/user/owned.txt", "x")
    info = sbx.files.get_info("/home/user/owned.txt")
    assert (info.owner, info.group, info.mode, info.size) == ("user", "user", 0o644, 1)


def test_make_dir_rename_remove(sbx):
    assert sbx.files.make_dir("/home/user/d/e") is True
    assert sbx.files.make_dir("/home/user/d/e") is False
    assert sbx.files.get_info("/home/user/d/e").mode == 0o755
    sbx.files.write("/home/user/d/x.txt", "x")
    moved = sbx.files.rename("/home/user/d/x.txt", "/home/user/d/new/y.txt")
    assert moved.path == "/home/user/d/new/y.txt"
    assert not sbx.files.exists("/home/user/d/x.txt")
    sbx.files.remove("/home/user/d")
    assert not sbx.files.exists("/home/user/d")


def test_watch_dir(sbx):
    sbx.files.make_dir("/tmp/watched")
    watcher = sbx.files.watch_dir("/tmp/watched")
    sbx.files.write("/tmp/watched/f.txt", "one")
    sbx.commands.run("echo more >> /tmp/watched/f.txt; rm /tmp/watched/f.txt")
    events = []

    def saw_remove():
        events.extend(watcher.get_new_events())
        return any(e.type.value == "remove" for e in events)

    eventually(saw_remove, what="remove event")
    watcher.stop()
    types = {e.type.value for e in events if e.name == "f.txt"}
    assert {"create", "write", "remove"} <= types, types
