"""pytest wiring for the 0.3 SDK interop test (a2a-sdk 0.3.x, the gateway's 0.3 dialect).

`scripts/interop` runs it after the 1.x suite against the same open gateway, whose base URL is
`A2A_INTEROP_URL`. Every test that takes the `binding` fixture runs once per binding named by
`--binding` (repeatable) or `A2A_INTEROP03_BINDINGS` (comma-separated), default all three
(the 0.3 gRPC service `a2a.v1.A2AService` is served beside the 1.0 one). A binding that is asked
for but missing from the agent card FAILS; nothing here skips.
"""

import os

import pytest

ALL_BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]
DEFAULT_BINDINGS = ALL_BINDINGS


def pytest_addoption(parser):
    parser.addoption(
        "--binding",
        action="append",
        default=None,
        choices=ALL_BINDINGS,
        help="binding to test (repeatable; default: A2A_INTEROP03_BINDINGS or all three)",
    )


def selected_bindings(config):
    chosen = config.getoption("--binding")
    if chosen:
        return chosen
    env = os.environ.get("A2A_INTEROP03_BINDINGS", "").strip()
    if env:
        names = [b.strip() for b in env.split(",") if b.strip()]
        unknown = [b for b in names if b not in ALL_BINDINGS]
        if unknown:
            raise pytest.UsageError(f"A2A_INTEROP03_BINDINGS: unknown binding(s) {unknown}")
        return names
    return list(DEFAULT_BINDINGS)


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
        report.longrepr = f"{item.nodeid} was skipped ({report.longrepr}); the interop test never skips"
