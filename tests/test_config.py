"""The configuration: resolved from the settings in force plus what is given, checked with one
clear error per setting, and changed only by put_in_force."""

from __future__ import annotations

import pytest

from pipeline.config import (
    DEFAULT_CUTOFFS,
    Config,
    check,
    in_force,
    parse_cutoffs,
    put_in_force,
    resolve,
)
from pipeline.errors import RecallwatchError
from pipeline.ingest import ingest_gold
from tests.conftest import golden, write_jsonl


def test_cutoffs_parse_sorted_and_unique():
    assert parse_cutoffs("10, 1,3,3") == (1, 3, 10)
    for bad in ("", "a,b", "0,1", "1,2000000"):
        with pytest.raises(RecallwatchError, match="--cutoffs"):
            parse_cutoffs(bad)


@pytest.mark.parametrize("config,message", [
    (Config(pass_mark=1.2), "--pass-mark 1.2 must lie in"),
    (Config(cutoffs=(0, 5)), "cutoffs '0,5' must be integers from 1"),
    (Config(cutoffs=()), "cutoffs '' must be integers"),
    (Config(grains=("week",)), "grain 'week' .* must be one of day, hour"),
    (Config(routes=("nope",)), "route 'nope' is not available"),
])
def test_each_bad_setting_is_one_clear_error(config, message):
    with pytest.raises(RecallwatchError, match=message):
        check(config)


def test_resolving_changes_nothing_in_force(con, tmp_path):
    assert in_force(con) == Config()
    assert resolve(con, cutoffs=(5, 1), pass_mark=0.5).cutoffs == (1, 5)
    assert in_force(con) == Config()


def test_put_in_force_is_what_later_resolutions_start_from(con, tmp_path):
    put_in_force(con, resolve(con, cutoffs=(1, 2), grains=("day", "hour")))
    config = resolve(con, pass_mark=0.6)
    assert (config.cutoffs, config.pass_mark, config.grains) == ((1, 2), 0.6, ("day", "hour"))
    put_in_force(con, resolve(con, cutoffs=DEFAULT_CUTOFFS))
    assert in_force(con).grains == ("day", "hour")  # what was not given stays


def test_gold_version_is_the_newest_loaded_unless_given(con, tmp_path):
    assert resolve(con).gold_version is None
    for version in ("v1", "v2"):
        write_jsonl(tmp_path / f"{version}.jsonl", [golden("g-1", [version])])
        ingest_gold(con, str(tmp_path / f"{version}.jsonl"), version)
    assert resolve(con).gold_version == "v2"
    assert resolve(con, gold_version="v1").gold_version == "v1"
    with pytest.raises(RecallwatchError, match="gold version 'v3' is not loaded"):
        resolve(con, gold_version="v3")



def test_a_name_given_twice_is_kept_once_and_a_negative_zero_pass_mark_is_zero(
        run_cli, tmp_path):
    # `--routes ids,ids` printed both, `--alert-metrics pass_rate,pass_rate` stored both, and
    # `--pass-mark -0` was stored and shown as -0.0, in window_metrics too
    from pipeline.warehouse import connect

    write_jsonl(tmp_path / "gold.jsonl", [golden("g-1", ["a"])])
    run_cli("ingest", "gold", tmp_path / "gold.jsonl", "--version", "v1")
    code, _, err = run_cli("config", "--routes", "ids,ids", "--grains", "day,day",
                           "--alert-metrics", "pass_rate,pass_rate", "--pass-mark", "-0")
    assert code == 0, err
    with connect(tmp_path / "wh" / "recallwatch.duckdb", read_only=True) as con:
        config = in_force(con)
    assert (config.routes, config.grains, config.alert_metrics) == (
        ("ids",), ("day",), ("pass_rate",))
    assert str(config.pass_mark) == "0.0"
