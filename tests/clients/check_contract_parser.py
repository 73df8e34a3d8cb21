"""contract.py sees a method added to the daemon's table or to docs/protocol.md's, and an error
kind added to common/error.cc or the docs: a copy of the three files with one of each added
must yield them, so the clients' tests would fail until the clients have them.
    check_contract_parser.py SOURCE_DIR"""

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import contract  # noqa: E402

source = Path(sys.argv[1])
with tempfile.TemporaryDirectory(prefix="ptybox-contract-parser-") as scratch:
    copy = Path(scratch)
    for name in ("runtime/methods.cc", "common/error.cc", "docs/protocol.md"):
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_text((source / name).read_text())
    before = (contract.methods_from_code(copy), contract.methods_from_docs(copy),
              contract.error_kinds_from_code(copy), contract.error_kinds_from_docs(copy))
    assert all(before), f"a parser found nothing in the real files: {before}"

    methods = copy / "runtime/methods.cc"
    text = methods.read_text()
    anchor = '      {.name = "terminal_open",'
    assert anchor in text, "runtime/methods.cc: the table's first entry moved; update this check"
    methods.write_text(text.replace(anchor, '      {.name = "terminal_added_in_code",\n       .summary = "x"},\n' + anchor, 1))
    error = copy / "common/error.cc"
    text = error.read_text()
    row = '    {ErrorKind::kBusy, "busy"},'
    assert row in text, "common/error.cc: the kind table's rows moved; update this check"
    error.write_text(text.replace(row, row + '\n    {ErrorKind::kAdded, "added_in_code"},', 1))
    docs = copy / "docs/protocol.md"
    text = docs.read_text()
    text = text.replace("| `terminal_list` | none |", "| `terminal_added_in_docs` | none | `{}` |\n| `terminal_list` | none |", 1)
    text = text.replace("| `busy` |", "| `added_in_docs` | x |\n| `busy` |", 1)
    docs.write_text(text)

    found = {"code": contract.methods_from_code(copy), "docs": contract.methods_from_docs(copy),
             "kinds (code)": contract.error_kinds_from_code(copy),
             "kinds (docs)": contract.error_kinds_from_docs(copy)}
    expected = {"code": "terminal_added_in_code", "docs": "terminal_added_in_docs",
                "kinds (code)": "added_in_code", "kinds (docs)": "added_in_docs"}
    for where, name in expected.items():
        assert name in found[where], f"{where}: {name} not found in {found[where]}"
    for old, new in zip(before, found.values()):
        assert set(old) < set(new), (old, new)
print("contract.py finds a method and an error kind added to the code's and the docs' tables")
