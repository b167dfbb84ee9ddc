"""sources: the cases of test_hostile4.py (issue 31) that guard this room.

What the cases share, and why (the old file's docstring): tests/hostile4_support.py."""

from __future__ import annotations

import socket

import pytest
from hostile4_support import (
    EAGLE,
    PASSWORD,
    SIGNATURE,
    TOKEN,
    Silent,
    _no_secret_is_kept_between_tests,  # noqa: F401 (fixtures)
    cli,
    cli_commands,
    one_line_error,
    run,
)
from remote_servers import LOCAL, RangeServer, Served
from test_remote import needs


@pytest.fixture
def web():
    needs("fsspec", "aiohttp")
    server = RangeServer()
    server.files["/run/t.json.gz"] = Served(EAGLE.read_bytes())
    try:
        yield server
    finally:
        server.close()


def secret_urls(web) -> list[str]:
    port = web.server_address[1]
    return [f"http://user:{PASSWORD}@{LOCAL}:{port}/run/t.json.gz",
            f"http://{LOCAL}:{port}/run/t.json.gz?X-Amz-Signature={SIGNATURE}&token={TOKEN}&part=1"]


def assert_no_secret(*texts: str | bytes) -> None:
    for text in texts:
        text = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        for secret in (PASSWORD, SIGNATURE, TOKEN):
            assert secret not in text, text[max(0, text.find(secret) - 200):text.find(secret) + 100]


@pytest.mark.parametrize("which", ["userinfo", "presigned"])
def test_a_urls_secrets_are_in_no_output_of_any_command_or_format(web, tmp_path, which):
    """Issue 31: reliability, round four."""
    url = secret_urls(web)[which == "presigned"]
    commands = [["stats", url, "--format", fmt] for fmt in ("table", "json", "csv", "markdown")]
    commands += [["check", url, "--budget", "VERIFY.mean<=1us", "--format", fmt] for fmt in ("text", "json", "markdown",
                                                                                            "junit")]
    commands += [["inspect", url, "--json"], ["inspect", url], ["relabel", url, "--dry-run", "--json"],
                 ["stats", url, "--baseline", url, "--format", "json"]]
    page, out = tmp_path / "r.html", tmp_path / "out.json.gz"
    # The first command as a process of its own, the others (each as that process would run it) in one more.
    env = {"GITHUB_ACTIONS": "true", "COLUMNS": "200"}
    *results, reported, relabelled = [cli(*commands[0], env=env), *cli_commands(
        *commands[1:], (["report", url, "-o", page], {}), (["relabel", url, "-o", out, "--json"], {}), env=env)]
    for command, done in zip(commands, results, strict=True):
        assert done.returncode in (0, 1), (command, done.stderr)
        assert "run/t.json.gz" in done.stdout + done.stderr, command  # the name is shown, its secrets are not
        assert_no_secret(done.stdout, done.stderr)
    done = reported
    assert done.returncode == 0, done.stderr
    assert_no_secret(page.read_bytes(), done.stdout, done.stderr)
    assert "<title>" in page.read_text() and "***" in page.read_text()
    done = relabelled
    assert done.returncode == 0 and out.exists(), done.stderr
    assert_no_secret(done.stdout, done.stderr)


def test_a_failing_urls_message_hides_its_secrets_a_stores_own_message_too(web):
    """A 404 and an unreachable server: spanfix's line, and what it quotes of aiohttp's message.
    (issue 31: reliability, round four)"""
    port = web.server_address[1]
    urls = (f"http://user:{PASSWORD}@{LOCAL}:{port}/missing.json?sig={SIGNATURE}",
            f"http://user:{PASSWORD}@{LOCAL}:1/t.json?X-Amz-Credential={TOKEN}")
    for done in cli_commands(*(["stats", url] for url in urls)):
        line = one_line_error(done.returncode, done.stderr, "***")
        assert_no_secret(done.stdout, done.stderr)
        assert line.count("***") >= 2, line


def test_an_s3_url_with_credentials_is_one_line_without_them(tmp_path):
    """Issue 31: reliability, round four."""
    needs("s3fs")
    done = cli("stats", f"s3://AKIAKEY00:{PASSWORD}@bucket/x.json",
               env={"AWS_ENDPOINT_URL_S3": f"http://{LOCAL}:1", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
                    "SPANFIX_CONNECT_TIMEOUT": "2", "AWS_MAX_ATTEMPTS": "1"})
    one_line_error(done.returncode, done.stderr, "s3://***@bucket/x.json")
    assert_no_secret(done.stdout, done.stderr)


SCHEMES = ["local", "memory", "github", "webhdfs", "ftp", "sftp", "zip", "simplecache"]


@pytest.fixture(scope="module")
def undocumented(tmp_path_factory):
    """Each scheme's `stats` and the listener its URL names (one each, that no other URL names): the
    commands in one process, each as a process of its own would run it."""
    folder = tmp_path_factory.mktemp("undocumented")
    listeners = {}
    try:
        urls = []
        for scheme in SCHEMES:
            listeners[scheme] = listener = socket.create_server((LOCAL, 0))
            listener.settimeout(0.1)
            port = listener.getsockname()[1]
            urls.append(f"{scheme}://{LOCAL}:{port}/t.json" if scheme not in ("local", "memory") else
                        f"{scheme}://{folder}/t.json")
        done = cli_commands(*(["stats", url] for url in urls))
        yield {scheme: (one, listeners[scheme]) for scheme, one in zip(SCHEMES, done, strict=True)}
    finally:
        for listener in listeners.values():
            listener.close()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_an_undocumented_scheme_is_one_line_before_any_connection(undocumented, scheme):
    """Issue 31: reliability, round four."""
    done, listener = undocumented[scheme]
    one_line_error(done.returncode, done.stderr, f"{scheme}:// is not a kind of URL spanfix reads or writes")
    with pytest.raises(TimeoutError):
        listener.accept()  # nothing connected


@pytest.mark.parametrize("command", [["report"], ["relabel"]])
def test_an_output_that_resolves_to_the_input_is_refused(tmp_path, command):
    """Issue 31: reliability, round four."""
    source = tmp_path / "t.json.gz"
    source.write_bytes(EAGLE.read_bytes())
    (tmp_path / "link.json.gz").symlink_to(source)
    for output in (f"local://{source}", f"file://{source}", str(tmp_path / "link.json.gz")):
        result = run(*command, source, "-o", output)
        assert result.exit_code == 2, (output, result.output)
        assert "Traceback" not in result.stderr
        assert source.read_bytes() == EAGLE.read_bytes(), output


def test_an_output_that_dies_with_the_process_is_refused(tmp_path):
    """Issue 31: reliability, round four."""
    for command in (["relabel", EAGLE, "-o", "memory://out/x.json"], ["report", EAGLE, "-o", "memory://out/r.html"]):
        result = run(*command)
        assert result.exit_code == 2, result.output
        assert "memory:// is not a kind of URL" in result.stderr and "wrote" not in result.output


# The bound the silent servers are given: each test waits it out twice (spanfix asks twice: the size, the bytes).
READ_SECONDS = "1"


@pytest.mark.parametrize("answer", [b"", b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\nAccept-Ranges: none\r\n\r\n"])
def test_a_web_server_that_says_nothing_is_one_line_after_the_read_timeout(answer):
    """Issue 31: reliability, round four."""
    needs("fsspec", "aiohttp")
    server = Silent(answer)
    try:
        done = cli("stats", f"http://{LOCAL}:{server.port}/t.json", timeout=90,
                   env={"SPANFIX_READ_TIMEOUT": READ_SECONDS})
    finally:
        server.close()
    one_line_error(done.returncode, done.stderr, f"within {READ_SECONDS} s (SPANFIX_READ_TIMEOUT)")


NO_DURATIONS = ["0", "-1", "soon", "nan"]


@pytest.fixture(scope="module")
def no_duration():
    """`stats` under each setting, in one process, each as a process of its own would run it."""
    done = cli_commands(*((["stats", f"http://{LOCAL}:1/t.json"], {"SPANFIX_READ_TIMEOUT": value})
                          for value in NO_DURATIONS))
    return dict(zip(NO_DURATIONS, done, strict=True))


@pytest.mark.parametrize("value", NO_DURATIONS)
def test_a_timeout_setting_that_is_no_duration_is_one_line(no_duration, value):
    """Issue 31: reliability, round four."""
    done = no_duration[value]
    one_line_error(done.returncode, done.stderr, "SPANFIX_READ_TIMEOUT")

