"""``--actions``: order, rewrite required, lower/emulate only when their code exists."""

import pytest

from ember_xla.batch.actions import PLUGINS, ActionError, plugin, validate


def test_actions_run_in_pipeline_order():
    assert validate(["verify", "rewrite"]) == ("rewrite", "verify")
    assert validate(["time", " rewrite "]) == ("rewrite", "time")


@pytest.mark.parametrize("names,msg", [
    (["rewrite", "bogus"], "unknown action 'bogus'"),
    (["verify"], "needs rewrite first"),
    ([], "empty"),
])
def test_bad_requests(names, msg):
    with pytest.raises(ActionError, match=msg):
        validate(names)


@pytest.mark.parametrize("name", sorted(PLUGINS))
def test_plugged_actions_follow_the_code(name):
    if plugin(name) is None:
        with pytest.raises(ActionError, match=f"'{name}' is not available in this build"):
            validate(["rewrite", name])
    else:
        assert name in validate(["rewrite", name])
