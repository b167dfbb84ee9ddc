"""Names shown without their secrets: a URL's userinfo (`https://user:password@host/...`) and the
values of its query's credentials (a presigned URL's `X-Amz-Signature=...`, an Azure SAS `sig=...`, a
`token=...`) become `***` wherever spanfix shows text; the URL itself is used as it was given.

Two rules, applied together by redact():

- every URL in the text (a scheme, `://`, up to a space, a quote or a bracket) is shown with its
  userinfo and its credential-like query values as `***` (see secret_key for which keys);
- every secret of the names the user gave (remember(): the command line's arguments, the API's
  paths, the URLs reached) is replaced wherever it occurs, however the text around it is spelled:
  a store's message quoting `KEY:SECRET@bucket`, a file name cut from its URL, a percent-decoded
  copy. Secrets shorter than MIN_SECRET characters are hidden where they stand in a URL only (a
  password of three letters would otherwise hide every word that holds them).

Both are linear in the text: `://` is found by str.find, each URL is scanned once to its end, and
each remembered secret is one str.replace. Nothing here imports anything of spanfix: every stage
that says something (errors, render/escape.py, the command line's streams) may call it.
"""

from __future__ import annotations

import re
import threading

SECRET = "***"
MIN_SECRET = 6  # a remembered secret shorter than this is hidden inside URLs only
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_LONGEST_SCHEME = 32
# Where a URL ends in running text, JSON, HTML, CSV or markdown: whitespace, quotes, brackets, a
# backslash (a JSON or markdown escape), and control characters.
_TAIL = re.compile(r"[^\s\"'<>`\\|{}()\x00-\x1f\x7f]*")  # one character class: no backtracking

# Query keys whose value is a credential, by what they contain, by prefix, or by name: S3 and GCS
# presigned URLs (X-Amz-*, X-Goog-*, and their older AWSAccessKeyId/GoogleAccessId, Signature,
# Expires), Azure SAS tokens (sv, se, sp, sig, ...), CloudFront's Policy and Key-Pair-Id, and any
# token, key, password, secret, credential or session.
_SECRET_WORDS = ("sig", "token", "key", "pass", "pwd", "secret", "credential", "auth", "session", "cookie")
_SECRET_PREFIXES = ("x-amz-", "x-goog-", "x-ms-", "x-oss-", "x-cos-")
_SIGNED_KEYS = frozenset({
    "sv", "ss", "srt", "sp", "se", "st", "spr", "sr", "sip", "si", "skoid", "sktid", "skt", "ske", "sks", "skv",
    "sdd", "saoid", "suoid", "scid", "rscc", "rscd", "rsce", "rscl", "rsct",  # Azure SAS
    "expires", "policy", "googleaccessid", "awsaccessid", "ossaccessid",  # v2 presigned URLs, CloudFront
})

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()  # remembered secrets, longest first (a longer one holds a shorter)


def secret_key(key: str) -> bool:
    """Is a query key one whose value is a credential?"""
    key = key.replace("\\", "").strip().lower()
    key = key.removeprefix("amp;")  # a query written into HTML: &amp;key=value
    return key in _SIGNED_KEYS or key.startswith(_SECRET_PREFIXES) or any(word in key for word in _SECRET_WORDS)


def _scheme_start(text: str, at: int) -> int | None:
    """Where the scheme before `://` at `at` starts (RFC 3986: a letter, then letters, digits, + . -)."""
    start = at
    while start > 0 and at - start < _LONGEST_SCHEME and text[start - 1] in _SCHEME_CHARS:
        start -= 1
    while start < at and not text[start].isalpha():  # a scheme starts with a letter
        start += 1
    return start if start < at else None


def _urls(text: str):
    """(start, end, authority start) of every URL in text, in order, each scanned once."""
    at = text.find("://")
    while at >= 0:
        start = _scheme_start(text, at)
        end = _TAIL.match(text, at + 3).end()
        if start is not None:
            yield start, end, at + 3
        at = text.find("://", max(end, at + 3))


def _path_start(url: str, authority: int) -> int:
    """Where a URL's authority (its userinfo, host and port) ends: at its path, query or fragment."""
    return min([at for at in (url.find(mark, authority) for mark in "/?#") if at >= 0] or [len(url)])


def _hidden_url(url: str, authority: int) -> str:
    """One URL with its userinfo and credential values as ***."""
    path = _path_start(url, authority)
    at = url.rfind("@", authority, path)
    if at >= 0 and url[authority:at] != SECRET:
        url = url[:authority] + SECRET + url[at:]
        path -= at - authority - len(SECRET)
    query = url.find("?", path)
    if query < 0:
        return url
    fragment = url.find("#", query)
    end = fragment if fragment >= 0 else len(url)
    parts = url[query + 1:end].split("&")
    for k, part in enumerate(parts):
        key, equals, value = part.partition("=")
        if equals and value and value != SECRET and secret_key(key):
            parts[k] = f"{key}={SECRET}"
    return url[:query + 1] + "&".join(parts) + url[end:]


def _without_url_secrets(text: str) -> str:
    pieces, last = [], 0
    for start, end, authority in _urls(text):
        url = text[start:end]
        hidden = _hidden_url(url, authority - start)
        if hidden != url:
            pieces += [text[last:start], hidden]
            last = end
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


def redact(text: str) -> str:
    """text with every secret hidden: see the module's docstring. Idempotent."""
    if not isinstance(text, str):
        return text
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, SECRET)
    return _without_url_secrets(text) if "://" in text else text


def redact_bytes(data: bytes) -> bytes:
    """redact() for UTF-8 bytes (JSON, a page); the same bytes when nothing is hidden."""
    if b"://" not in data and not any(secret.encode("utf-8", "surrogateescape") in data for secret in _secrets):
        return data
    text = data.decode("utf-8", "surrogateescape")
    hidden = redact(text)
    return data if hidden == text else hidden.encode("utf-8", "surrogateescape")


def secrets_of(name: str) -> set[str]:
    """The secrets a name holds: each URL's userinfo (whole, its user, its password) and its credential
    query values, as written and percent-decoded."""
    from urllib.parse import unquote

    found: set[str] = set()

    def add(value: str) -> None:
        for spelling in (value, unquote(value)):
            if spelling and spelling != SECRET:
                found.add(spelling)

    for start, end, authority in _urls(name):
        url = name[start:end]
        authority -= start
        path = _path_start(url, authority)
        at = url.rfind("@", authority, path)
        if at >= 0:
            userinfo = url[authority:at]
            add(userinfo)
            user, _, password = userinfo.partition(":")
            add(user)
            add(password)
        query = url.find("?", path)
        if query >= 0:
            for part in url[query + 1:].split("#")[0].split("&"):
                key, equals, value = part.partition("=")
                if equals and secret_key(key):
                    add(value)
    return found


def remember(*names: object) -> None:
    """Keep the secrets of names (the user's arguments, paths, URLs), to hide wherever they occur."""
    global _secrets
    found = set()
    for name in names:
        if isinstance(name, str) and "://" in name:
            found |= {secret for secret in secrets_of(name) if len(secret) >= MIN_SECRET}
    if found - set(_secrets):
        with _lock:
            _secrets = tuple(sorted(set(_secrets) | found, key=len, reverse=True))


def forget() -> None:
    """Drop every remembered secret (tests)."""
    global _secrets
    with _lock:
        _secrets = ()


__all__ = ["SECRET", "forget", "redact", "redact_bytes", "remember", "secret_key", "secrets_of"]
