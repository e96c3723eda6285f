"""``util.xla_flags``: the values of a flag in ``XLA_FLAGS``, the last one wins, a bare flag
reads as "true" and an empty value stays empty (YNNPACK's fusions off)."""

from ember_xla.util.xla_flags import xla_flag, xla_flag_values


def test_values_in_order_and_the_last_wins(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_a=1 --xla_ab=x --xla_b --xla_a=2 --xla_c=")
    assert xla_flag_values("xla_a") == ["1", "2"]
    assert xla_flag("xla_a") == "2"
    assert xla_flag("xla_b") == "true"
    assert xla_flag("xla_c") == ""
    assert xla_flag("xla_d") is None


def test_unset(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert xla_flag_values("xla_a") == [] and xla_flag("xla_a") is None
