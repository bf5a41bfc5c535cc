"""``inspect_variable``: resolved without running code, described with capped, time-boxed reprs."""

from __future__ import annotations

import time

import pytest

from pseudoclaude_nb.errors import ToolError
from pseudoclaude_nb.notebook import inspect_variable
from pseudoclaude_nb.notebook.inspect import REPR_CAP, safe_repr


class Config:
    def __init__(self) -> None:
        self.lr = 0.01
        self.layers = [64, 32]
        self.calls = 0

    @property
    def expensive(self) -> int:
        self.calls += 1
        raise AssertionError("a property getter ran")

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"__getattr__ ran for {name}")


class Model:
    def __init__(self) -> None:
        self.config = Config()


class RaisingRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr is broken")


class HangingRepr:
    def __repr__(self) -> str:
        time.sleep(30)
        return "never"


def test_builtins_get_size_facts_and_a_repr() -> None:
    ns = {"revenue": [120, 95, 143], "prices": {"a": 1, "b": 2}, "name": "Ada", "n": 3}
    text = inspect_variable(ns, "revenue")
    assert text.splitlines()[0] == "revenue: list"
    assert "len: 3" in text and "first items: 120, 95, 143" in text and "repr: [120, 95, 143]" in text
    assert "keys: 'a', 'b'" in inspect_variable(ns, "prices")
    assert "len: 3" in inspect_variable(ns, "name") and "repr: 'Ada'" in inspect_variable(ns, "name")
    assert inspect_variable(ns, "n").splitlines() == ["n: int", "repr: 3"]


def test_big_containers_are_capped_without_full_repr() -> None:
    ns = {"big": list(range(5_000_000)), "text": "x" * 100_000}
    started = time.monotonic()
    text = inspect_variable(ns, "big")
    assert time.monotonic() - started < 1.0
    assert "len: 5,000,000" in text and len(text) < REPR_CAP + 500
    assert len(inspect_variable(ns, "text")) < REPR_CAP + 500


def test_nested_attributes_resolve_statically() -> None:
    ns = {"model": Model()}
    assert "model.config.lr: float" in inspect_variable(ns, "model.config.lr")
    assert "first items: 64, 32" in inspect_variable(ns, "model.config.layers")
    text = inspect_variable(ns, "model.config.expensive")  # no getter, no __getattr__
    assert "property" in text and "not read" in text
    assert ns["model"].config.calls == 0


def test_unknown_names_are_errors_with_similar_names() -> None:
    ns = {"revenue": [1], "revenues_2024": [2], "In": [], "_hidden": 1}
    with pytest.raises(ToolError, match=r"no name 'revenu' in the notebook; similar names: revenue"):
        inspect_variable(ns, "revenu")
    with pytest.raises(ToolError, match="similar names: config"):
        inspect_variable({"model": Model()}, "model.confg")
    with pytest.raises(ToolError, match="not a dotted Python name"):
        inspect_variable(ns, "revenue[0]")


def test_a_raising_repr_is_reported() -> None:
    text = inspect_variable({"obj": RaisingRepr()}, "obj")
    assert "RaisingRepr" in text and "(repr raised RuntimeError: repr is broken)" in text


def test_a_hanging_repr_is_cut_off_in_time() -> None:
    started = time.monotonic()
    text = safe_repr(HangingRepr(), seconds=0.3)
    assert time.monotonic() - started < 2.0
    assert "did not finish within 0.3 s" in text


def test_functions_show_their_signature() -> None:
    def total(values: list[int], scale: float = 1.0) -> float:
        return sum(values) * scale

    text = inspect_variable({"total": total}, "total")
    assert "signature: total(values: 'list[int]', scale: 'float' = 1.0)" in text  # string hints here


def test_numpy_and_pandas_objects_get_summaries() -> None:
    np = pytest.importorskip("numpy")
    pd = pytest.importorskip("pandas")
    ns = {
        "arr": np.zeros((3, 4), dtype="float32"),
        "df": pd.DataFrame({"region": ["n", "s"], "sales": [1.5, 2.5]}),
        "s": pd.Series([1, 2, 3], name="units"),
    }
    arr = inspect_variable(ns, "arr")
    assert "shape: (3, 4)" in arr and "dtype: float32" in arr and "size: 12" in arr
    df = inspect_variable(ns, "df")
    assert df.startswith("df: pandas.") and "DataFrame" in df.splitlines()[0] and "shape: (2, 2)" in df
    assert "columns: region, sales" in df and "sales: float64" in df
    series = inspect_variable(ns, "s")
    assert "dtype: int64" in series and "name: 'units'" in series
    assert "df.shape" not in inspect_variable(ns, "df.columns")  # an attribute is resolved statically


def test_the_package_never_imports_numpy_or_pandas_itself() -> None:
    import subprocess
    import sys

    code = (
        "from pseudoclaude_nb.notebook import inspect_variable\n"
        "inspect_variable({'x': [1]}, 'x')\n"
        "import sys; print('numpy' in sys.modules, 'pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False False"
