"""pytest wiring shared by both SDK interop suites (`python/`, a2a-sdk 1.x, and `python03/`,
a2a-sdk 0.3.x): each conftest installs it with the variable naming its bindings.

Every test that takes the `binding` fixture runs once per binding named by `--binding`
(repeatable) or the suite's variable (comma-separated), default all three. A binding that is
asked for but missing from the agent card FAILS, and a skipped test counts as failed: nothing
here skips.
"""

import os

import pytest

ALL_BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]


def hooks(bindings_var):
    """The hooks and fixtures of a suite whose bindings `bindings_var` names."""

    def pytest_addoption(parser):
        parser.addoption(
            "--binding",
            action="append",
            default=None,
            choices=ALL_BINDINGS,
            help=f"binding to test (repeatable; default: {bindings_var} or all three)",
        )

    def selected_bindings(config):
        chosen = config.getoption("--binding")
        if chosen:
            return chosen
        env = os.environ.get(bindings_var, "").strip()
        if not env:
            return list(ALL_BINDINGS)
        names = [b.strip() for b in env.split(",") if b.strip()]
        unknown = [b for b in names if b not in ALL_BINDINGS]
        if unknown:
            raise pytest.UsageError(f"{bindings_var}: unknown binding(s) {unknown}")
        return names

    def pytest_generate_tests(metafunc):
        if "binding" in metafunc.fixturenames:
            metafunc.parametrize("binding", selected_bindings(metafunc.config))

    @pytest.fixture(scope="session")
    def base_url():
        url = os.environ.get("A2A_INTEROP_URL")
        if not url:
            pytest.fail(
                "A2A_INTEROP_URL is not set: run the interop test through scripts/interop, "
                "or start a gateway and export A2A_INTEROP_URL=http://127.0.0.1:<port>"
            )
        return url.rstrip("/")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        """A skipped test is a failed test here: the interop run must never skip silently."""
        outcome = yield
        report = outcome.get_result()
        if report.skipped:
            report.outcome = "failed"
            report.longrepr = (
                f"{item.nodeid} was skipped ({report.longrepr}); the interop test never skips"
            )

    return {
        "pytest_addoption": pytest_addoption,
        "pytest_generate_tests": pytest_generate_tests,
        "base_url": base_url,
        "pytest_runtest_makereport": pytest_runtest_makereport,
    }


def url_of(var):
    """A URL `scripts/interop` passes in the environment, without a trailing slash."""
    url = os.environ.get(var)
    if not url:
        pytest.fail(f"{var} is not set: run the interop test through scripts/interop")
    return url.rstrip("/")
