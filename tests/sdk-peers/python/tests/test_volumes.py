"""Volumes through the official Python SDK: the volume API, its content API (at
E2B_VOLUME_API_URL, with the volume's own token) and `volume_mounts`. Releases without
`Volume` (2.29.1) skip, visibly."""

import os

import pytest
from e2b import Sandbox

try:
    from e2b import Volume, VolumeException, VolumePathNotFoundException
except ImportError:  # releases before volumes
    Volume = None

pytestmark = pytest.mark.skipif(Volume is None, reason="this release has no volumes")


@pytest.fixture
def volume():
    created = Volume.create(f"pyvol-{os.getpid()}-{os.urandom(4).hex()}")
    yield created
    try:
        Volume.destroy(created.volume_id)
    except Exception:  # noqa: BLE001 - teardown of a volume a test destroyed already
        pass


def test_volume_api_and_content(volume):
    info = Volume.get_info(volume.volume_id)
    assert (info.volume_id, info.name) == (volume.volume_id, volume.name)
    assert any(v.volume_id == volume.volume_id for v in Volume.list())
    with pytest.raises(VolumeException):
        Volume.create(volume.name)

    volume.write_file("/notes.txt", "from python")
    assert volume.read_file("/notes.txt") == "from python"
    with pytest.raises(VolumeException):
        volume.write_file("/notes.txt", "again")
    volume.write_file("/notes.txt", "replaced", force=True)
    assert volume.read_file("/notes.txt") == "replaced"

    made = volume.make_dir("/x/y", force=True, uid=1000, gid=1000, mode=0o700)
    assert (made.path, made.uid, made.mode) == ("/x/y", 1000, 0o700)
    volume.write_file("/x/y/z.txt", "z", mode=0o640)
    stat = volume.get_info("/x/y/z.txt")
    assert (stat.name, stat.size, stat.mode) == ("z.txt", 1, 0o640)
    assert [e.path for e in volume.list("/x", depth=2)] == ["/x/y", "/x/y/z.txt"]
    assert volume.update_metadata("/x/y/z.txt", mode=0o600).mode == 0o600

    with pytest.raises(VolumePathNotFoundException):
        volume.read_file("/missing.txt")
    volume.remove("/x")
    assert not volume.exists("/x")


def test_a_mounted_volume_outlives_its_sandboxes(volume, make_sandbox):
    writer = make_sandbox(volume_mounts={"/mnt/data": volume})
    writer.files.write("/mnt/data/from-writer.txt", "kept")
    assert Sandbox.get_info(writer.sandbox_id).volume_mounts == [
        {"name": volume.name, "path": "/mnt/data"}
    ]
    with pytest.raises(VolumeException):
        Volume.destroy(volume.volume_id)
    writer.kill()

    reader = make_sandbox(volume_mounts={"/srv/vol": volume.name})
    assert reader.files.read("/srv/vol/from-writer.txt") == "kept"
    assert volume.read_file("/from-writer.txt") == "kept"
    reader.kill()
    assert Volume.destroy(volume.volume_id) is True
    assert Volume.destroy(volume.volume_id) is False
