"""Progress (bar on a terminal, log lines otherwise) and the summary's CSV and text table."""

import io

from ember_xla.batch.progress import Progress
from ember_xla.batch.summary import COLUMNS, row_of, text_table, to_csv, totals


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_log_lines_when_not_a_terminal():
    s = io.StringIO()
    p = Progress(3, "auto", s)
    p.update("a.pb", "ok", 1.25)
    p.update("b.pb", "failed", 0.5, "b.pb: truncated")
    lines = s.getvalue().splitlines()
    assert lines[0].startswith("batch: [1/3] a.pb ok (1.2 s, ETA ")
    assert lines[1].startswith("batch: [2/3] b.pb failed") and lines[1].endswith(
        ": b.pb: truncated")


def test_bar_with_counts_and_eta_on_a_terminal():
    s = _Tty()
    p = Progress(4, "auto", s, width=8)
    p.start()
    p.update("a", "ok", 1.0)
    p.close()
    out = s.getvalue()
    assert "\rbatch [........] 0/4" in out and "\rbatch [##......] 1/4  ok 1  failed 0" in out
    assert "ETA 0:0" in out and out.endswith("\n")


def test_csv_and_table():
    entries = [
        {"key": "m1", "status": "ok", "input": "/x/m1", "error": "",
         "row": {"clusters": 2, "near_misses": 1, "verify": "bitwise", "max_abs_diff": 0.0,
                 "speedup": 1.5, "notices": ["/x/m1[serve]: sized"]}},
        {"key": "m2", "status": "failed", "input": "/x/m2", "error": "/x/m2: bad", "row": {}},
        {"key": "m3", "status": "failed", "input": "/x/m3", "error": "/x/m30: other", "row": {}},
    ]
    rows = [row_of(e) for e in entries]
    csv = to_csv(rows).splitlines()
    assert csv[0] == ",".join(COLUMNS) and csv[0].startswith("model,status,clusters")
    assert csv[1].startswith("m1,ok,2,1,bitwise,0,1.5,") and csv[2].startswith("m2,failed,,")
    tot = totals(rows)
    assert tot["ok"] == 1 and tot["failed"] == 2 and tot["clusters"] == 2
    text = text_table(rows, tot)
    # the model's path is not repeated after its name (another path is kept)
    assert "1.50x" in text and "failed: m2: bad\n" in text
    assert "failed: m3: /x/m30: other" in text and "note: m1: [serve]: sized" in text
    assert "3 models: 1 ok, 2 failed; 2 clusters in 1 models" in text
