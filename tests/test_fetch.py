"""`evictlab data fetch` against a real HTTP server on 127.0.0.1 (spec section 0, item 2)."""

from __future__ import annotations

import hashlib
import http.server
import threading

import pytest

from evictlab import cli
from evictlab.core.fetch import FetchError, dataset_url, default_output, fetch_dataset, pin_from_config
from evictlab.core.protocol import DEFAULT_CONFIG, DatasetPin, load_protocol
from evictlab.errors import ContractError, OutputExistsError

BODY = "[{\"question_id\": \"a1\", \"note\": \"caf\u00e9 \u6771\u4eac\"}]\n".encode("utf-8") * 50
BODY_SHA256 = hashlib.sha256(BODY).hexdigest()
REVISION = "1" * 40


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.requests.append(self.path)
        route = self.server.routes.get(self.path)
        if route is None:
            self.send_error(404, "no such file")
            return
        status, body, announced, before_body = route
        self.send_response(status)
        self.send_header("Content-Length", str(announced if announced is not None else len(body)))
        self.end_headers()
        if before_body is not None:
            before_body()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.requests = []
    httpd.routes = {"/good.json": (200, BODY, None, None)}
    httpd.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    # A short poll interval keeps shutdown() quick at teardown.
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def pin(sha256=BODY_SHA256, filename="oracle.json"):
    return DatasetPin("someone/data-set", REVISION, filename, sha256)


def folder_names(path):
    return sorted(p.name for p in path.iterdir())


# --------------------------------------------------------------------------- addresses and defaults


def test_primary_and_mirror_urls_follow_the_resolve_path():
    real = load_protocol().config.dataset
    assert dataset_url(real) == (
        "https://huggingface.co/datasets/xiaowu0162/longmemeval-cleaned/resolve/"
        "98d7416c24c778c2fee6e6f3006e7a073259d48f/longmemeval_oracle.json"
    )
    assert dataset_url(pin(), "https://mirror.example.org/") == (
        f"https://mirror.example.org/datasets/someone/data-set/resolve/{REVISION}/oracle.json"
    )
    for bad in ("mirror.example.org", "ftp://mirror.example.org", "https://mirror.example.org/?x=1"):
        with pytest.raises(ContractError, match="must be an http"):
            dataset_url(pin(), bad)


def test_default_output_is_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_output(pin()) == tmp_path / "xdg" / "evictlab" / "oracle.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_output(pin()) == tmp_path / "home" / ".cache" / "evictlab" / "oracle.json"


def test_the_pin_comes_from_the_config():
    assert pin_from_config() == load_protocol().config.dataset
    assert pin_from_config(DEFAULT_CONFIG) == load_protocol().config.dataset


# --------------------------------------------------------------------------- downloads


def test_download_succeeds_when_the_hash_matches(server, tmp_path, capsys):
    target = tmp_path / "sub" / "oracle.json"
    result = fetch_dataset(pin(), target, url=server.base + "/good.json")
    assert target.read_bytes() == BODY
    assert (result.path, result.sha256, result.size, result.downloaded) == (target, BODY_SHA256, len(BODY), True)
    assert folder_names(target.parent) == ["oracle.json"]  # no temporary file left behind
    assert "oracle.json" in capsys.readouterr().err  # the progress bar


def test_mirror_host_is_asked_for_the_pinned_path(server, tmp_path):
    path = f"/datasets/someone/data-set/resolve/{REVISION}/oracle.json"
    server.routes[path] = (200, BODY, None, None)
    result = fetch_dataset(pin(), tmp_path / "oracle.json", mirror=server.base, progress=False)
    assert server.requests == [path]
    assert result.url == server.base + path


def test_hash_mismatch_leaves_nothing_at_the_destination(server, tmp_path):
    target = tmp_path / "oracle.json"
    expected = "ab" * 32
    with pytest.raises(FetchError) as error:
        fetch_dataset(pin(expected), target, url=server.base + "/good.json", progress=False)
    assert expected in str(error.value) and BODY_SHA256 in str(error.value)
    assert folder_names(tmp_path) == []


def test_an_existing_file_with_the_pinned_hash_is_kept_without_a_request(server, tmp_path):
    target = tmp_path / "oracle.json"
    target.write_bytes(BODY)
    result = fetch_dataset(pin(), target, url=server.base + "/good.json", progress=False)
    assert result.downloaded is False and result.sha256 == BODY_SHA256
    assert server.requests == []


def test_an_existing_different_file_is_never_overwritten(server, tmp_path):
    target = tmp_path / "oracle.json"
    target.write_bytes(b"my own notes\n")
    with pytest.raises(OutputExistsError, match="refusing to overwrite"):
        fetch_dataset(pin(), target, url=server.base + "/good.json", progress=False)
    assert target.read_bytes() == b"my own notes\n"
    assert server.requests == []


def test_a_file_that_appears_during_the_download_is_not_replaced(server, tmp_path):
    target = tmp_path / "oracle.json"
    server.routes["/slow.json"] = (200, BODY, None, lambda: target.write_bytes(b"written meanwhile\n"))
    with pytest.raises(OutputExistsError):
        fetch_dataset(pin(), target, url=server.base + "/slow.json", progress=False)
    assert target.read_bytes() == b"written meanwhile\n"
    assert folder_names(tmp_path) == ["oracle.json"]


def test_http_404_is_a_clear_error(server, tmp_path):
    with pytest.raises(FetchError, match=r"/missing\.json: HTTP 404"):
        fetch_dataset(pin(), tmp_path / "oracle.json", url=server.base + "/missing.json", progress=False)
    assert folder_names(tmp_path) == []


def test_a_truncated_body_is_an_error(server, tmp_path):
    server.routes["/short.json"] = (200, BODY[:100], len(BODY), None)
    with pytest.raises(FetchError, match=r"short\.json"):
        fetch_dataset(pin(), tmp_path / "oracle.json", url=server.base + "/short.json", progress=False)
    assert folder_names(tmp_path) == []


def test_an_unreachable_host_is_a_clear_error(tmp_path, refused_port):
    with pytest.raises(FetchError, match="cannot download"):
        fetch_dataset(pin(), tmp_path / "oracle.json", url=f"http://127.0.0.1:{refused_port}/x.json", progress=False)
    assert folder_names(tmp_path) == []


def test_mirror_and_url_together_are_refused(tmp_path):
    with pytest.raises(ContractError, match="not both"):
        fetch_dataset(pin(), tmp_path / "x.json", mirror="https://a.example", url="https://b.example/x")


# --------------------------------------------------------------------------- command line


def config_pinning_body(tmp_path):
    text = DEFAULT_CONFIG.read_text(encoding="utf-8")
    real = load_protocol().config.dataset.sha256
    assert text.count(real) == 1
    config = tmp_path / "config.yaml"
    config.write_text(text.replace(real, BODY_SHA256), encoding="utf-8")
    return config


def test_cli_fetch_downloads_then_reports_the_file_in_place(server, tmp_path, capsys):
    config = config_pinning_body(tmp_path)
    target = tmp_path / "out" / "oracle.json"
    argv = ["data", "fetch", "--config", str(config), "--url", server.base + "/good.json",
            "--output", str(target), "--quiet"]
    assert cli.main(argv) == 0
    assert target.read_bytes() == BODY
    assert "matches the pin" in capsys.readouterr().out
    assert cli.main(argv) == 0
    assert "already holds the pinned file" in capsys.readouterr().out
    assert server.requests == ["/good.json"]


def test_cli_fetch_rejects_bytes_that_are_not_the_pinned_dataset(server, tmp_path, capsys):
    target = tmp_path / "oracle.json"
    argv = ["data", "fetch", "--url", server.base + "/good.json", "--output", str(target), "--quiet"]
    assert cli.main(argv) != 0
    err = capsys.readouterr().err
    assert load_protocol().config.dataset.sha256 in err and BODY_SHA256 in err
    assert not target.exists()


def test_cli_fetch_refuses_mirror_and_url_together(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["data", "fetch", "--mirror", "https://a.example", "--url", "https://b.example/x"])
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
