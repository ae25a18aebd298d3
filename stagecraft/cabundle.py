"""Find the CA bundle that builds hand to pip, for hosts behind a TLS-intercepting proxy.

Order: ``--ca-bundle PATH``; the environment (``STAGECRAFT_CA_BUNDLE``, ``PIP_CERT``,
``REQUESTS_CA_BUNDLE``, ``SSL_CERT_FILE``); pip's own configuration (``cert`` in the
``global`` or ``install`` section of ``PIP_CONFIG_FILE``, /etc/pip.conf,
/etc/xdg/pip/pip.conf, ~/.config/pip/pip.conf, ~/.pip/pip.conf; see
https://pip.pypa.io/en/stable/topics/configuration/). The bundle reaches builds only as a
BuildKit secret (``--secret id=pip-ca``), so it lands in no layer, history entry or label.
"""

from __future__ import annotations

import configparser
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError

SECRET_ID = "pip-ca"
ENV_VARS = ("STAGECRAFT_CA_BUNDLE", "PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")


@dataclass(frozen=True)
class CABundle:
    """A CA bundle file and where it was found (``--ca-bundle``, an env var, a pip.conf)."""

    path: Path
    origin: str


def _pip_configs() -> list[Path]:
    home = Path.home()
    files = [Path("/etc/pip.conf"), Path("/etc/xdg/pip/pip.conf"),
             home / ".config" / "pip" / "pip.conf", home / ".pip" / "pip.conf"]
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(Path(os.environ["PIP_CONFIG_FILE"]))
    return files


def check_pem(path: Path, where: str) -> None:
    """Raise ``InputError`` unless ``path`` holds at least one PEM certificate that
    OpenSSL loads (``ssl.SSLContext.load_verify_locations``, as pip's TLS stack would)."""
    try:
        ssl.create_default_context(cafile=str(path))
    except (ssl.SSLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or str(exc)
        raise InputError.one(where, f"not a PEM CA bundle ({str(reason)[:120]})",
                             "pass a file of -----BEGIN CERTIFICATE----- blocks, such as "
                             "/etc/ssl/certs/ca-certificates.crt, or --no-ca-bundle") from None


def find_ca_bundle(option: str | None = None, disabled: bool = False) -> CABundle | None:
    """The bundle to use, or None. Raises ``InputError`` when ``option`` names no
    readable file, or when the bundle found (option, variable or pip.conf) is not PEM
    certificates. A setting found elsewhere that points at a missing file is skipped."""
    if disabled:
        return None
    if option:
        p = Path(option)
        where = f"--ca-bundle {option if len(option) <= 200 else option[:200] + '...'}"
        if not p.is_file() or not os.access(p, os.R_OK):
            raise InputError.one(where, "no readable file there",
                                 "pass the PEM bundle your proxy's CA is in")
        check_pem(p, where)
        return CABundle(p.resolve(), "--ca-bundle")
    for var in ENV_VARS:
        value = os.environ.get(var)
        if value and Path(value).is_file():
            check_pem(Path(value), f"{var}={value[:200]}")
            return CABundle(Path(value).resolve(), f"${var}")
    found: CABundle | None = None
    for cfg in _pip_configs():  # later files override earlier ones, as in pip
        parser = configparser.ConfigParser()
        try:
            parser.read(cfg)
        except configparser.Error:
            continue
        for section in ("global", "install"):
            value = parser.get(section, "cert", fallback=None)
            if value and Path(value).is_file():
                found = CABundle(Path(value).resolve(), str(cfg))
    if found is not None:
        check_pem(found.path, f"{found.origin}: cert = {found.path}")
    return found
