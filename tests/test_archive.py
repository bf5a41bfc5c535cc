"""Export and import (SPEC §6.4): a redacted zip with a manifest; imports that trust nothing."""

from __future__ import annotations

import hashlib
import io
import json
import stat
import struct
import warnings
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from IPython.core.error import UsageError

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.context.spill import write_spill
from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.errors import SessionError
from pseudoclaude_nb.messages import ToolCall
from pseudoclaude_nb.session import (
    ArchiveError,
    ImportLimits,
    export_session,
    import_session,
    list_sessions,
    load_session,
    trash_session,
)
from pseudoclaude_nb.session.archive import import_check
from pseudoclaude_nb.session.entries import SpillEntry
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir
from tests.scripts import run_magic as run
from tests.scripts import script, turn

# Built at run time, so no key-shaped literal sits in the repository.
ANTHROPIC = "sk-ant-api03-" + "Zq7Kp2Lm9Xw4Rt6Yv8Bn3Cd5Fg1Hj0" * 3 + "AA"
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
SECRETS = (ANTHROPIC, GITHUB)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def unredacted_session(ws: Path) -> tuple[str, Path]:
    """A session written with redaction off (an old log, or redact_secrets = False)."""
    path = new_session_dir(ws)
    spill = write_spill(path, "call_1", "bash", f"env dump\nTOKEN={GITHUB}\n" + "line\n" * 2000, redact=False)
    with SessionWriter(path, model="m", redact=False) as w:
        conv = Conversation()
        w.attach(conv)
        conv.add_user(f"use my key {ANTHROPIC} please")
        conv.add_assistant_tool_calls(
            "", [ToolCall(id="call_1", name="bash", arguments={"command": f"echo {GITHUB}"})]
        )
        conv.add_tool_result("call_1", f"[Tool result too large … saved to {spill.path}]")
        conv.add_assistant("done")
        w.record(SpillEntry.new(**spill.entry_fields()))
    raw = (path / "conversation.jsonl").read_bytes() + (path / spill.path).read_bytes()
    assert all(s.encode() in raw for s in SECRETS)  # the premise: the source holds them
    return path.name, path


# --- export -----------------------------------------------------------------------------------------


def test_export_is_a_zip_with_manifest_hashes_and_no_secrets(workspace: Path, tmp_path: Path) -> None:
    sid, src = unredacted_session(workspace)
    dest = tmp_path / "out.zip"
    report = export_session(workspace, sid, dest)

    assert report.path == dest and report.bytes == dest.stat().st_size
    # The key in the prompt (log and the title in meta.json); the token in the call and the spill.
    assert report.redactions == {"anthropic": 2, "github": 2}
    assert report.files == 4
    with zipfile.ZipFile(dest) as zf:
        names = sorted(zf.namelist())
        data = {n: zf.read(n) for n in names}
    assert names == ["conversation.jsonl", "manifest.json", "meta.json", "tool-results/call_1.txt"]
    manifest = json.loads(data["manifest.json"])
    assert manifest["format"] == "pseudoclaude-session" and manifest["version"] == 1
    assert manifest["session_id"] == sid and manifest["redacted"] is True and manifest["spills"] is True
    listed = {f["path"]: f for f in manifest["files"]}
    assert sorted(listed) == [n for n in names if n != "manifest.json"]
    for name, f in listed.items():
        assert f["sha256"] == sha(data[name]) and f["size"] == len(data[name]), name
    for name, body in data.items():
        for secret in SECRETS:
            assert secret.encode() not in body, (name, secret)
    assert b"[REDACTED:anthropic]" in data["conversation.jsonl"]
    assert b"TOKEN=[REDACTED:github]" in data["tool-results/call_1.txt"]
    # The spill entry describes the file as exported, not the unredacted original.
    spill = [json.loads(x) for x in data["conversation.jsonl"].splitlines() if b'"spill"' in x][0]
    assert spill["sha256"] == sha(data["tool-results/call_1.txt"])
    assert spill["bytes"] == len(data["tool-results/call_1.txt"])
    # The source is untouched.
    assert ANTHROPIC.encode() in (src / "conversation.jsonl").read_bytes()


def test_export_without_spills(workspace: Path, tmp_path: Path) -> None:
    sid, _ = unredacted_session(workspace)
    export_session(workspace, sid, tmp_path / "out.zip", spills=False)
    with zipfile.ZipFile(tmp_path / "out.zip") as zf:
        assert sorted(zf.namelist()) == ["conversation.jsonl", "manifest.json", "meta.json"]
        assert json.loads(zf.read("manifest.json"))["spills"] is False


def test_export_refuses_an_existing_file_and_a_missing_folder(workspace: Path, tmp_path: Path) -> None:
    sid, _ = unredacted_session(workspace)
    (tmp_path / "taken.zip").write_bytes(b"mine")
    with pytest.raises(SessionError, match="already exists; choose another path"):
        export_session(workspace, sid, tmp_path / "taken.zip")
    assert (tmp_path / "taken.zip").read_bytes() == b"mine"
    with pytest.raises(SessionError, match="does not exist"):
        export_session(workspace, sid, tmp_path / "no" / "out.zip")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []


# --- round trip -------------------------------------------------------------------------------------


def real_session(ws: Path, tmp_path: Path) -> str:
    """Through the product: a spilled read of a file that holds a key, then a summary."""
    (ws / "config.txt").write_text(f"api_key = {ANTHROPIC}\n" + "setting = 1\n" * 400)
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps(script(turn("Reading.", ("read_file", {"path": "config.txt"})), turn("Read it.")))
    )
    agent = Agent(
        PseudoClaude(
            workspace=str(ws),
            provider="scripted",
            script=str(path),
            permission_mode="auto",
            spill_bytes=2_000,
        )
    )
    try:
        assert agent.run("read config.txt").status == "done"
        return agent.session.id
    finally:
        agent.close()


def test_round_trip_into_another_workspace(workspace: Path, tmp_path: Path) -> None:
    sid = real_session(workspace, tmp_path)
    src = workspace / ".pseudoclaude/sessions" / sid
    assert len(load_session(src).spills) == 1
    export_session(workspace, sid, tmp_path / "s.zip")

    other = tmp_path / "other"
    other.mkdir()
    report = import_session(other, tmp_path / "s.zip")

    assert report.session_id == sid and not report.renamed and report.problems == []
    dst = other / ".pseudoclaude/sessions" / sid
    assert load_session(dst).messages == load_session(src).messages
    assert tree(dst / "tool-results") == tree(src / "tool-results")
    assert (other / ".pseudoclaude/.gitignore").is_file()
    assert (dst / "conversation.jsonl").stat().st_mode & 0o777 == 0o600
    [info] = list_sessions(other)
    assert info.id == sid and info.title == "read config.txt"


def test_a_session_open_in_a_kernel_can_be_exported(workspace: Path, tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(script(turn("one"))))
    agent = Agent(PseudoClaude(workspace=str(workspace), provider="scripted", script=str(path)))
    try:
        agent.run("first")
        export_session(workspace, agent.session.id, tmp_path / "open.zip")  # the writer holds the lock
        agent.run("second")  # and keeps writing afterwards
        with zipfile.ZipFile(tmp_path / "open.zip") as zf:
            log = zf.read("conversation.jsonl")
        assert b'"first"' in log and b'"second"' not in log
    finally:
        agent.close()


def test_import_renames_when_the_id_is_taken_here_or_in_the_trash(workspace: Path, tmp_path: Path) -> None:
    sid = real_session(workspace, tmp_path)
    export_session(workspace, sid, tmp_path / "s.zip")
    first = import_session(workspace, tmp_path / "s.zip")
    assert first.renamed and first.original_id == sid and first.session_id != sid
    trash_session(workspace, sid)
    second = import_session(workspace, tmp_path / "s.zip")
    assert second.renamed and second.session_id not in (sid, first.session_id)
    assert len(list_sessions(workspace)) == 2


def test_magic_export_and_import(ip, workspace: Path, tmp_path: Path) -> None:
    sid, _ = unredacted_session(workspace)
    out = run(ip, f"sessions export {sid} shared.zip")
    assert f"exported session {sid} to {workspace / 'shared.zip'}" in out
    assert "4 files" in out and "4 secrets redacted (anthropic 2, github 2)" in out
    assert "spilled results left out" in run(ip, f"sessions export --no-spills {sid} lean.zip")
    out = run(ip, "sessions import shared.zip")
    assert "imported shared.zip as session" in out
    assert f"its id {sid} is already taken here, so it got the new id" in out


# --- malicious archives -----------------------------------------------------------------------------


@pytest.fixture
def good(workspace: Path, tmp_path: Path) -> dict[str, bytes]:
    """The members of a valid export, to forge variants from."""
    sid, _ = unredacted_session(workspace)
    export_session(workspace, sid, tmp_path / "good.zip")
    with zipfile.ZipFile(tmp_path / "good.zip") as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def forge(
    path: Path,
    members: dict[str, bytes],
    *,
    extra: list[tuple[zipfile.ZipInfo | str, bytes]] = (),
    manifest: dict | bytes | None = None,
    list_extra: bool = True,
) -> Path:
    """A zip of ``members`` + ``extra`` whose manifest lists them with correct hashes.

    ``manifest`` replaces that manifest (raw bytes are written as they are).
    """
    if manifest is None:
        manifest = json.loads(members["manifest.json"])
        files = [
            {"path": n, "sha256": sha(d), "size": len(d)} for n, d in members.items() if n != "manifest.json"
        ]
        if list_extra:
            files += [
                {"path": getattr(i, "filename", i), "sha256": sha(d), "size": len(d)}
                for i, d in extra
                if not getattr(i, "filename", i).endswith("/")
            ]
        manifest["files"] = files
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        warnings.simplefilter("ignore")  # zipfile warns about duplicate names; that is the point
        zf.writestr("manifest.json", manifest if isinstance(manifest, bytes) else json.dumps(manifest))
        for name, data in members.items():
            if name != "manifest.json":
                zf.writestr(name, data)
        for info, data in extra:
            zf.writestr(info, data)
    return path


def symlink(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def rejected(workspace: Path, archive: Path, match: str, limits: ImportLimits | None = None) -> None:
    before = tree(workspace)
    with pytest.raises(ArchiveError, match=match) as info:
        import_session(workspace, archive, limits=limits)
    assert str(info.value).endswith("; nothing was imported")
    assert tree(workspace) == before, "a rejected archive wrote something"


def test_the_forge_itself_makes_importable_archives(good, workspace: Path, tmp_path: Path) -> None:
    # Guards the tests below: they fail for their flaw, not for a broken forge.
    report = import_session(workspace, forge(tmp_path / "plain.zip", good))
    assert report.files == 3 and report.renamed


@pytest.mark.parametrize(
    "extra, match",
    [
        ([("/etc/cron.d/evil", b"x")], "absolute path"),
        ([("tool-results/../../evil.txt", b"x")], "climbs out with '..'"),
        ([("../evil.txt", b"x")], "climbs out with '..'"),
        ([("tool-results\\..\\evil.txt", b"x")], "backslash"),
        ([(symlink("tool-results/link.txt"), b"/etc/passwd")], "symbolic link"),
        ([("other/", b"")], "directory 'other/' is outside the session layout"),
        ([("other/file.txt", b"x")], "outside the session layout"),
        ([("tool-results/sub/x.txt", b"x")], "outside the session layout"),
        ([("writer.lock", b"123")], "outside the session layout"),
        ([("tool-results/.hidden", b"x")], "outside the session layout"),
        ([("meta.json", b"{}")], "appears twice"),
    ],
    ids=[
        "absolute",
        "dotdot-nested",
        "dotdot",
        "backslash",
        "symlink",
        "dir",
        "other",
        "nested",
        "lock",
        "hidden",
        "dup",
    ],
)
def test_bad_members_are_rejected_before_anything_is_written(good, workspace, tmp_path, extra, match) -> None:
    rejected(workspace, forge(tmp_path / "bad.zip", good, extra=extra), match)


def test_encrypted_member_is_rejected(good, workspace, tmp_path) -> None:
    archive = forge(tmp_path / "bad.zip", good, extra=[("tool-results/secret.txt", b"x")])
    # zipfile never writes the "encrypted" flag itself; set bit 0 of the general-purpose flags.
    _patch_headers(archive, "tool-results/secret.txt", local=6, central=8, fmt="<H", value=0x801)
    rejected(workspace, archive, "encrypted")


def test_manifest_problems_are_rejected(good, workspace, tmp_path) -> None:
    base = json.loads(good["manifest.json"])
    cases = [
        ({**base, "version": 2}, "version 2 .made by a newer pseudoclaude_nb; upgrade"),
        ({**base, "version": "1"}, "version '1'"),
        ({**base, "format": "something-else"}, "not of format 'pseudoclaude-session'"),
        ({**base, "session_id": "../../evil"}, "not a valid id"),
        ({**base, "files": "all"}, "no list of files"),
        (
            {**base, "files": [{"path": "conversation.jsonl", "sha256": "zz", "size": 1}]},
            "malformed file entry",
        ),
    ]
    for i, (manifest, match) in enumerate(cases):
        rejected(workspace, forge(tmp_path / f"m{i}.zip", good, manifest=manifest), match)
    no_manifest = tmp_path / "none.zip"
    with zipfile.ZipFile(no_manifest, "w") as zf:
        zf.writestr("conversation.jsonl", good["conversation.jsonl"])
    rejected(workspace, no_manifest, "no manifest.json")
    rejected(workspace, forge(tmp_path / "e.zip", good, manifest={}), "not of format")
    rejected(
        workspace, forge(tmp_path / "j.zip", good, manifest=b"{not json"), "manifest.json is not valid JSON"
    )


def test_hash_size_and_listing_mismatches_are_rejected(good, workspace, tmp_path) -> None:
    manifest = json.loads(good["manifest.json"])
    # The log changed after the manifest was written.
    tampered = dict(good, **{"conversation.jsonl": good["conversation.jsonl"] + b'{"v":1}\n'})
    listed = {**manifest, "files": [dict(f) for f in manifest["files"]]}
    rejected(
        workspace,
        forge(tmp_path / "t.zip", tampered, manifest=listed),
        "does not match its sha256|manifest says",
    )
    same_size = bytearray(good["conversation.jsonl"])
    same_size[10] ^= 1
    rejected(
        workspace,
        forge(tmp_path / "s.zip", dict(good, **{"conversation.jsonl": bytes(same_size)}), manifest=listed),
        "conversation.jsonl does not match its sha256",
    )
    wrong_size = {**manifest, "files": [dict(f, size=f["size"] + 1) for f in manifest["files"]]}
    rejected(workspace, forge(tmp_path / "w.zip", good, manifest=wrong_size), "but the manifest says")
    rejected(
        workspace,
        forge(tmp_path / "u.zip", good, extra=[("tool-results/extra.txt", b"x")], list_extra=False),
        "tool-results/extra.txt not listed in the manifest",
    )
    missing = {
        **manifest,
        "files": manifest["files"] + [{"path": "tool-results/gone.txt", "sha256": "0" * 64, "size": 1}],
    }
    rejected(
        workspace, forge(tmp_path / "x.zip", good, manifest=missing), "listed in the manifest but missing"
    )


def test_too_many_and_oversized_members_are_rejected(good, workspace, tmp_path) -> None:
    many = [(f"tool-results/r{i}.txt", b"x") for i in range(10)]
    rejected(
        workspace,
        forge(tmp_path / "many.zip", good, extra=many),
        "more than the limit of 8",
        ImportLimits(max_members=8),
    )
    big = [("tool-results/big.txt", b"0" * 50_000)]
    rejected(
        workspace,
        forge(tmp_path / "big.zip", good, extra=big),
        "'tool-results/big.txt' declares 50,000 bytes, over the limit of 40,000",
        ImportLimits(max_member_bytes=40_000),
    )
    halves = [(f"tool-results/h{i}.txt", b"0" * 3_000) for i in range(4)]
    rejected(
        workspace,
        forge(tmp_path / "total.zip", good, extra=halves),
        "members total more than the limit",
        ImportLimits(max_total_bytes=sum(len(d) for d in good.values()) + 8_000),
    )


def _patch_headers(path: Path, member: str, *, local: int, central: int, fmt: str, value: int) -> None:
    """Overwrite one field of ``member``'s local and central zip headers (offsets per APPNOTE)."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        at = zf.getinfo(member).header_offset
    assert data[at : at + 4] == b"PK\x03\x04"
    struct.pack_into(fmt, data, at + local, value)
    pos, name = 0, member.encode()
    while True:
        entry = data.find(b"PK\x01\x02", pos)
        assert entry >= 0, member
        n = struct.unpack_from("<H", data, entry + 28)[0]
        if data[entry + 46 : entry + 46 + n] == name:
            struct.pack_into(fmt, data, entry + central, value)
            break
        pos = entry + 4
    path.write_bytes(bytes(data))


def _patch_size(path: Path, member: str, size: int) -> None:
    _patch_headers(path, member, local=22, central=24, fmt="<I", value=size)


def test_a_zip_bomb_that_lies_about_its_size_is_rejected(good, workspace, tmp_path) -> None:
    # 20 MB of zeros deflates to ~20 KB; the headers (and the manifest) claim 100 bytes.
    bomb = b"\0" * 20_000_000
    small = bomb[:100]
    archive = forge(tmp_path / "bomb.zip", good, extra=[("tool-results/bomb.txt", small)])
    with zipfile.ZipFile(archive) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    manifest = json.loads(members["manifest.json"])
    members["tool-results/bomb.txt"] = bomb
    forge(archive, members, manifest=manifest)  # manifest still says 100 bytes and small's hash
    _patch_size(archive, "tool-results/bomb.txt", 100)
    assert archive.stat().st_size < 200_000
    rejected(workspace, archive, "damaged|inflates past|does not match")


def test_an_honest_bomb_is_rejected_by_its_declared_size(good, workspace, tmp_path) -> None:
    archive = forge(tmp_path / "bomb.zip", good, extra=[("tool-results/bomb.txt", b"\0" * 20_000_000)])
    assert archive.stat().st_size < 200_000
    rejected(workspace, archive, "over the limit", ImportLimits(max_member_bytes=1_000_000))


def test_not_a_zip_and_a_missing_file(workspace, tmp_path) -> None:
    (tmp_path / "junk.zip").write_bytes(b"PK\x03\x04 this is not really a zip")
    rejected(workspace, tmp_path / "junk.zip", "not a readable zip archive")
    with pytest.raises(ArchiveError, match="cannot read"):
        import_session(workspace, tmp_path / "absent.zip")


def test_an_archive_file_over_the_total_limit_is_not_even_opened(good, workspace, tmp_path) -> None:
    archive = forge(tmp_path / "a.zip", good)
    rejected(workspace, archive, "over the import limit of 1,000", ImportLimits(max_total_bytes=1_000))


class CountingStream(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.served = 0

    def read(self, n: int = -1) -> bytes:
        chunk = super().read(n)
        self.served += len(chunk)
        return chunk


def test_reading_a_member_stops_just_past_its_declared_size(tmp_path) -> None:
    # CPython's zipfile already stops at the declared size; this guards our own bound, for
    # readers (or zipfile versions) that would not.
    stream = CountingStream(b"\0" * 10_000_000)
    fake_zip = SimpleNamespace(open=lambda info: stream)
    info = SimpleNamespace(filename="tool-results/x.txt")
    with pytest.raises(ArchiveError, match="inflates past its declared size"):
        import_check.hash_member(fake_zip, info, tmp_path / "x.zip", 1_000, None)
    assert stream.served == 1_001


def test_importing_a_folder_says_it_is_no_regular_file(ip, workspace: Path) -> None:
    # The audit found "%sessions import failed: Is a directory (8)": the 8 was a file descriptor.
    (workspace / "exports").mkdir()
    with pytest.raises(UsageError) as raised:
        ip.run_line_magic("sessions", "import exports")
    said = str(raised.value)
    assert "rejected exports: it is not a regular file (a FIFO, device or directory)" in said, said
    assert "(8)" not in said and "Is a directory" not in said
