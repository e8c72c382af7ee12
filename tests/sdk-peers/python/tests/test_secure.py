import os
import urllib.error
import urllib.request

import httpx


def test_token_required(sbx):
    assert sbx.commands.run("echo ok").stdout == "ok\n"
    bare = httpx.post(
        f"{os.environ['E2B_SANDBOX_URL']}/process.Process/List",
        headers={"E2b-Sandbox-Id": sbx.sandbox_id, "E2b-Sandbox-Port": "49983"},
        json={},
    )
    assert bare.status_code == 401


def test_signed_urls_without_routing_headers(sbx):
    upload = sbx.upload_url("/home/user/signed.txt")
    up = httpx.post(upload, files={"file": ("signed.txt", b"signed content")})
    assert up.status_code == 200, up.text
    download = sbx.download_url("/home/user/signed.txt")
    with urllib.request.urlopen(download) as response:
        assert response.read() == b"signed content"
    expired = sbx.download_url("/home/user/signed.txt", use_signature_expiration=-10)
    try:
        urllib.request.urlopen(expired)
        raise AssertionError("an expired signature was accepted")
    except urllib.error.HTTPError as err:
        assert err.code == 401
