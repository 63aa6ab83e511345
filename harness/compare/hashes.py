"""sha256 of files, remembered by the file's identity (size, mtime, ctime, inode: ctime changes on every
write and cannot be set back), so an unchanged file is read once; cached results stay keyed by content.
A campaign keeps its memo in metrics/hashes.json (one that cannot be written lives for the process)."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from harness.safe_write import atomic_write_json
from harness.store import sha256_file

HASHES_JSON = "hashes.json"
MEMO_VERSION = 1


class FileHashes:
    """sha256 by file identity; ``path`` (optional) is where the memo is kept between processes."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path is not None else None
        self.entries: dict[str, list] = {}  # resolved path -> [size, mtime_ns, ctime_ns, inode, sha256]
        self.changed = False
        # no memo, or a damaged one: files are hashed again
        with contextlib.suppress(OSError, ValueError, AttributeError):
            data = json.loads(self.path.read_text()) if self.path is not None else {}
            if data.get("version") == MEMO_VERSION and isinstance(data.get("files"), dict):
                self.entries = data["files"]

    def sha256(self, file: Path) -> str:
        resolved = str(Path(file).resolve())
        st = os.stat(resolved)
        ident = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        known = self.entries.get(resolved)
        if known is not None and known[:4] == ident:
            return known[4]
        sha = sha256_file(Path(resolved))
        self.entries[resolved] = [*ident, sha]
        self.changed = True
        return sha

    def save(self) -> bool:
        """Write the memo when it learnt something; False when it cannot be written."""
        if self.path is None or not self.changed:
            return True
        live = {k: v for k, v in self.entries.items() if os.path.exists(k)}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self.path, {"version": MEMO_VERSION, "files": live})
        except OSError:
            return False
        self.changed = False
        return True


PROCESS_HASHES = FileHashes()  # for files outside a campaign (harness compare on two mp4s)
