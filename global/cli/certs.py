"""`vglobal certs`: a development CA, a server certificate for the Global's names and
addresses, and client certificates for agents (mutual TLS), written as PEM files. For a test
bed or a first try: production certificates come from the organisation's CA (cert-manager)."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey


def certs(
    out: Annotated[Path, typer.Option("--out", help="Directory the PEM files go to")] = Path(
        "vglobal-certs"
    ),
    host: Annotated[
        list[str] | None,
        typer.Option(
            "--host",
            help="A DNS name or IP address clients reach the Global at (repeat; default "
            "localhost and 127.0.0.1)",
        ),
    ] = None,
    client: Annotated[
        list[str] | None,
        typer.Option("--client", help="Issue an agent client certificate with this name (repeat)"),
    ] = None,
    days: Annotated[int, typer.Option(min=1, help="Validity of every certificate")] = 365,
) -> None:
    """Write a development CA (ca.crt, ca.key), a server certificate for --host names
    (server.crt, server.key) and, per --client, an agent certificate; then print how to use
    them."""
    names = host or ["localhost", "127.0.0.1"]
    out.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = issue("vglobal development CA", None, days=days, ca=True)
    write(out / "ca", ca_cert, ca_key)
    server_cert, server_key = issue(names[0], (ca_cert, ca_key), days=days, sans=names)
    write(out / "server", server_cert, server_key)
    for name in client or []:
        write(out / f"client-{name}", *issue(name, (ca_cert, ca_key), days=days, client=True))
    typer.echo(f"wrote {out}/ca.crt, server.crt/.key for {', '.join(names)}")
    typer.echo("\nServer:")
    typer.echo(f"  export VGLOBAL_TLS__CERT_FILE={out}/server.crt")
    typer.echo(f"  export VGLOBAL_TLS__KEY_FILE={out}/server.key")
    if client:
        typer.echo(f"  export VGLOBAL_TLS__CLIENT_CA_FILE={out}/ca.crt  # agents must show one")
    typer.echo("CLI (and `vglobal kubeconfig`, which embeds it for kubectl):")
    typer.echo(f"  export VGLOBAL_CA_FILE={out}/ca.crt")
    typer.echo("Agent:")
    extra = (
        f" --cert-file {out}/client-{client[0]}.crt --key-file {out}/client-{client[0]}.key"
        if client
        else ""
    )
    typer.echo(f"  vglobal agent ... --ca-file {out}/ca.crt{extra}")


def issue(
    subject: str,
    issuer: tuple[x509.Certificate, EllipticCurvePrivateKey] | None,
    *,
    days: int,
    ca: bool = False,
    sans: list[str] | None = None,
    client: bool = False,
) -> tuple[x509.Certificate, EllipticCurvePrivateKey]:
    """A certificate for `subject` signed by `issuer` (self-signed without), P-256 keys."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    issuer_name, issuer_key = (issuer[0].subject, issuer[1]) if issuer else (name, key)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if sans:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_san(n) for n in sans]), critical=False
        )
    if not ca:
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256()), key


def write(path: Path, cert: x509.Certificate, key: EllipticCurvePrivateKey) -> None:
    from cryptography.hazmat.primitives import serialization

    path.with_suffix(".crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path = path.with_suffix(".key")
    key_path.touch(mode=0o600)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _san(name: str) -> x509.GeneralName:
    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)
