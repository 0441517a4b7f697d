"""Interop: the official A2A Python SDK (a2a-sdk 1.x) as a client of a2a-gateway.

Every test runs once per binding (JSONRPC, HTTP+JSON, GRPC; see conftest.py). Each builds an
SDK client the way an application would: fetch the public agent card with the SDK's
`A2ACardResolver`, then `ClientFactory(ClientConfig(supported_protocol_bindings=[binding],
use_client_preference=True))`, so the SDK picks the card's interface for that binding and
nothing else. The test asserts that the SDK really chose that binding's 1.0 transport (not
another binding, and not its 0.3 compatibility transport).

The gateway under test serves two built-in agents: `echo` (default) and `scenario` (tenant
"scenario", driven by a data part {"chunks": N, "delayMs": M, "end": E}).
"""

import asyncio
import contextlib
import functools
import uuid

import grpc
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.client.transports.grpc import GrpcTransport
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.client.transports.rest import RestTransport
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf import struct_pb2

TRANSPORT_CLASS = {
    "JSONRPC": JsonRpcTransport,
    "HTTP+JSON": RestTransport,
    "GRPC": GrpcTransport,
}

S = pb.TaskState
TERMINAL = {S.TASK_STATE_COMPLETED, S.TASK_STATE_FAILED, S.TASK_STATE_CANCELED, S.TASK_STATE_REJECTED}

# One test must never hang the suite: each test body runs under this deadline.
TEST_TIMEOUT_SECS = 60


def async_test(fn):
    """Run an `async def` test body in a fresh event loop (no pytest plugin needed)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        async def bounded():
            return await asyncio.wait_for(fn(*args, **kwargs), TEST_TIMEOUT_SECS)

        return asyncio.run(bounded())

    return wrapper


# --------------------------------------------------------------------------------------------
# What the SDK puts on the wire (recorded so the tests can assert and document it)
# --------------------------------------------------------------------------------------------


class Wire:
    """Headers / metadata of every request the SDK sent, in order."""

    def __init__(self):
        self.http = []  # (method, path, headers) for JSON-RPC and HTTP+JSON (and the card)
        self.http_responses = []  # (method, path, status, headers)
        self.grpc = []  # (method, metadata) for gRPC
        self.grpc_responses = []  # (method, initial metadata) of unary gRPC calls

    async def on_http_request(self, request):
        self.http.append((request.method, request.url.path, dict(request.headers)))

    async def on_http_response(self, response):
        request = response.request
        self.http_responses.append(
            (request.method, request.url.path, response.status_code, dict(response.headers))
        )

    def record_grpc(self, details):
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        self.grpc.append((method, dict(details.metadata or [])))
        return method

    def grpc_interceptors(self):
        return [_GrpcUnaryRecorder(self), _GrpcStreamRecorder(self)]


# grpc.aio files an interceptor under the first interface it implements only, so one class each.
class _GrpcUnaryRecorder(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, wire):
        self.wire = wire

    async def intercept_unary_unary(self, continuation, client_call_details, request):
        method = self.wire.record_grpc(client_call_details)
        call = await continuation(client_call_details, request)
        try:
            initial = await call.initial_metadata()
        except Exception:  # noqa: BLE001 - recording must not change the call's outcome
            initial = None
        self.wire.grpc_responses.append((method, dict(initial or [])))
        return call


class _GrpcStreamRecorder(grpc.aio.UnaryStreamClientInterceptor):
    def __init__(self, wire):
        self.wire = wire

    async def intercept_unary_stream(self, continuation, client_call_details, request):
        self.wire.record_grpc(client_call_details)
        return await continuation(client_call_details, request)


@contextlib.asynccontextmanager
async def sdk_client(base_url, binding, *, streaming, wire=None, interceptors=None):
    """An SDK client for `binding`, built from the gateway's public agent card."""
    wire = wire or Wire()
    http = httpx.AsyncClient(
        timeout=httpx.Timeout(30.0),
        event_hooks={"request": [wire.on_http_request], "response": [wire.on_http_response]},
    )
    try:
        config = ClientConfig(
            streaming=streaming,
            httpx_client=http,
            supported_protocol_bindings=[binding],
            use_client_preference=True,
            grpc_channel_factory=lambda target: grpc.aio.insecure_channel(
                target, interceptors=wire.grpc_interceptors()
            ),
        )
        # The factory sets its default A2A-Version header on the httpx client, so build it
        # before the card fetch (as ClientFactory.create_from_url does).
        factory = ClientFactory(config)
        card = await A2ACardResolver(http, base_url).get_agent_card()
        listed = [(i.protocol_binding, i.url, i.protocol_version) for i in card.supported_interfaces]
        assert any(b == binding for b, _, _ in listed), (
            f"the agent card at {base_url}/.well-known/agent-card.json does not list binding "
            f"{binding!r}; supportedInterfaces = {listed}"
        )
        client = factory.create(card, interceptors)
        transport = client._transport  # the SDK keeps it here; no public accessor
        transport = getattr(transport, "_base", transport)  # TenantTransportDecorator, if any
        assert isinstance(transport, TRANSPORT_CLASS[binding]), (
            f"asked the SDK for {binding}, it built {type(transport).__name__}"
        )
        try:
            yield client
        finally:
            await client.close()
    finally:
        await http.aclose()


# --------------------------------------------------------------------------------------------
# Request builders and helpers
# --------------------------------------------------------------------------------------------


def text_message(text, *, task_id="", context_id=""):
    return pb.Message(
        message_id=str(uuid.uuid4()),
        role=pb.Role.ROLE_USER,
        parts=[pb.Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


def scenario_message(*, chunks=1, delay_ms=0, end="completed", context_id=""):
    data = struct_pb2.Value()
    data.struct_value.update({"chunks": chunks, "delayMs": delay_ms, "end": end})
    return pb.Message(
        message_id=str(uuid.uuid4()),
        role=pb.Role.ROLE_USER,
        parts=[pb.Part(data=data)],
        context_id=context_id,
    )


def send_request(message, *, tenant="", return_immediately=False, history_length=None, push=None):
    req = pb.SendMessageRequest(message=message, tenant=tenant)
    req.configuration.return_immediately = return_immediately
    if history_length is not None:
        req.configuration.history_length = history_length
    if push is not None:
        req.configuration.task_push_notification_config.CopyFrom(push)
    return req


async def collect(stream):
    return [event async for event in stream]


async def send_once(client, req, context=None):
    """A non-streaming send: the SDK yields exactly one StreamResponse (task or message)."""
    events = await collect(client.send_message(req, context=context))
    assert len(events) == 1, f"non-streaming send yielded {len(events)} events: {events}"
    return events[0]


def kind(event):
    return event.WhichOneof("payload")


def state_name(state):
    return S.Name(state)


def artifact_text(artifact):
    return "".join(p.text for p in artifact.parts)


# --------------------------------------------------------------------------------------------
# Agent card
# --------------------------------------------------------------------------------------------


@async_test
async def test_card(base_url, binding):
    async with httpx.AsyncClient(timeout=10) as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()
    assert card.name
    assert card.capabilities.streaming
    assert card.capabilities.push_notifications
    ifaces = {i.protocol_binding: i for i in card.supported_interfaces}
    assert binding in ifaces, f"binding {binding} not in card: {list(card.supported_interfaces)}"
    iface = ifaces[binding]
    assert iface.protocol_version == "1.0"
    host_port = base_url.split("://", 1)[1]
    expected_url = {
        "JSONRPC": f"{base_url}/a2a/jsonrpc",
        "HTTP+JSON": f"{base_url}/a2a/rest",
        "GRPC": host_port,
    }[binding]
    assert iface.url == expected_url
    # The SDK's own interface choice for this binding (protocol version negotiation).
    best = ClientFactory._find_best_interface(list(card.supported_interfaces), [binding])
    assert best is not None and best.url == iface.url
    # Building a client must pick that binding's transport (asserted inside sdk_client).
    async with sdk_client(base_url, binding, streaming=False):
        pass


# --------------------------------------------------------------------------------------------
# Send (blocking)
# --------------------------------------------------------------------------------------------


@async_test
async def test_send_echo(base_url, binding):
    async with sdk_client(base_url, binding, streaming=False) as client:
        event = await send_once(client, send_request(text_message("hello interop")))
    assert kind(event) == "task", event
    task = event.task
    assert task.id and task.context_id
    assert task.status.state == S.TASK_STATE_COMPLETED, state_name(task.status.state)
    assert [a.name for a in task.artifacts] == ["echo"]
    assert artifact_text(task.artifacts[0]) == "hello interop"
    assert task.status.HasField("timestamp")


@async_test
async def test_send_scenario_blocking(base_url, binding):
    async with sdk_client(base_url, binding, streaming=False) as client:
        event = await send_once(
            client, send_request(scenario_message(chunks=3, delay_ms=10), tenant="scenario")
        )
    assert kind(event) == "task"
    task = event.task
    assert task.status.state == S.TASK_STATE_COMPLETED, state_name(task.status.state)
    assert len(task.artifacts) == 1
    assert len(task.artifacts[0].parts) == 3, task.artifacts[0]


@async_test
async def test_send_direct_message_reply(base_url, binding):
    async with sdk_client(base_url, binding, streaming=False) as client:
        event = await send_once(client, send_request(scenario_message(end="message"), tenant="scenario"))
    assert kind(event) == "message", event
    assert event.message.role == pb.Role.ROLE_AGENT
    assert event.message.message_id


@async_test
async def test_send_failed_and_rejected(base_url, binding):
    async with sdk_client(base_url, binding, streaming=False) as client:
        for end, expected in [("failed", S.TASK_STATE_FAILED), ("rejected", S.TASK_STATE_REJECTED)]:
            event = await send_once(client, send_request(scenario_message(end=end), tenant="scenario"))
            assert kind(event) == "task"
            assert event.task.status.state == expected, (end, state_name(event.task.status.state))


@async_test
async def test_multi_turn_input_required(base_url, binding):
    async with sdk_client(base_url, binding, streaming=False) as client:
        first = await send_once(
            client, send_request(scenario_message(end="input-required"), tenant="scenario")
        )
        task = first.task
        assert task.status.state == S.TASK_STATE_INPUT_REQUIRED, state_name(task.status.state)
        # The follow-up names the task; it goes to the task's agent.
        second = await send_once(
            client,
            send_request(text_message("here you go", task_id=task.id, context_id=task.context_id)),
        )
        assert kind(second) == "task"
        assert second.task.id == task.id
        assert second.task.status.state == S.TASK_STATE_COMPLETED, state_name(second.task.status.state)
        # A terminal task accepts no more messages.
        with pytest.raises(UnsupportedOperationError):
            await send_once(client, send_request(text_message("again", task_id=task.id)))


# --------------------------------------------------------------------------------------------
# Streaming
# --------------------------------------------------------------------------------------------


@async_test
async def test_stream_scenario(base_url, binding):
    chunks = 4
    async with sdk_client(base_url, binding, streaming=True) as client:
        events = await collect(
            client.send_message(
                send_request(scenario_message(chunks=chunks, delay_ms=20), tenant="scenario")
            )
        )
    kinds = [kind(e) for e in events]
    assert kinds[0] == "task", kinds
    task_id = events[0].task.id
    assert task_id
    statuses = [e.status_update.status.state for e in events if kind(e) == "status_update"]
    assert statuses[0] == S.TASK_STATE_WORKING, [state_name(s) for s in statuses]
    assert statuses[-1] == S.TASK_STATE_COMPLETED, [state_name(s) for s in statuses]
    assert kinds[-1] == "status_update", kinds
    updates = [e.artifact_update for e in events if kind(e) == "artifact_update"]
    assert len(updates) == chunks, kinds
    assert all(u.task_id == task_id for u in updates)
    assert [u.append for u in updates] == [False] + [True] * (chunks - 1)
    assert [u.last_chunk for u in updates] == [False] * (chunks - 1) + [True]
    assert len({u.artifact.artifact_id for u in updates}) == 1
    # Order: task, WORKING, chunks, COMPLETED.
    assert kinds == ["task", "status_update"] + ["artifact_update"] * chunks + ["status_update"], kinds


@async_test
async def test_stream_echo(base_url, binding):
    async with sdk_client(base_url, binding, streaming=True) as client:
        events = await collect(client.send_message(send_request(text_message("streamed"))))
    assert kind(events[0]) == "task"
    last = events[-1]
    final_state = (
        last.status_update.status.state if kind(last) == "status_update" else last.task.status.state
    )
    assert final_state == S.TASK_STATE_COMPLETED, events


@async_test
async def test_stream_direct_message(base_url, binding):
    async with sdk_client(base_url, binding, streaming=True) as client:
        events = await collect(
            client.send_message(send_request(scenario_message(end="message"), tenant="scenario"))
        )
    assert [kind(e) for e in events] == ["message"], events


@async_test
async def test_subscribe(base_url, binding):
    """Follow a running task: the first event is the Task, then its chunks, then COMPLETED."""
    chunks, delay_ms = 4, 400  # ~1.6 s of work: room for the subscribe call to start first
    async with sdk_client(base_url, binding, streaming=True) as client:
        started = await send_once_nonstreaming(
            base_url,
            binding,
            send_request(
                scenario_message(chunks=chunks, delay_ms=delay_ms),
                tenant="scenario",
                return_immediately=True,
            ),
        )
        task_id = started.task.id
        assert started.task.status.state not in TERMINAL
        events = await collect(client.subscribe(pb.SubscribeToTaskRequest(id=task_id)))
    assert kind(events[0]) == "task", events[0]
    assert events[0].task.id == task_id
    # Chunks already in the snapshot are not repeated: snapshot parts + streamed chunks = all.
    snapshot_parts = sum(len(a.parts) for a in events[0].task.artifacts)
    streamed = [e.artifact_update for e in events if kind(e) == "artifact_update"]
    assert snapshot_parts + len(streamed) == chunks, (snapshot_parts, [kind(e) for e in events])
    assert streamed and streamed[-1].last_chunk
    last = events[-1]
    assert kind(last) == "status_update", last
    assert last.status_update.status.state == S.TASK_STATE_COMPLETED


@async_test
async def test_subscribe_then_cancel(base_url, binding):
    """Follow a hanging task; a cancel from another client ends the stream with CANCELED."""
    started = await send_once_nonstreaming(
        base_url,
        binding,
        send_request(scenario_message(end="hang"), tenant="scenario", return_immediately=True),
    )
    task_id = started.task.id
    async with sdk_client(base_url, binding, streaming=True) as follower, sdk_client(
        base_url, binding, streaming=False
    ) as canceler:
        events = []
        async for event in follower.subscribe(pb.SubscribeToTaskRequest(id=task_id)):
            events.append(event)
            if len(events) == 1:
                assert kind(event) == "task" and event.task.id == task_id, event
                canceled = await canceler.cancel_task(pb.CancelTaskRequest(id=task_id))
                assert canceled.status.state == S.TASK_STATE_CANCELED
    last = events[-1]
    assert kind(last) == "status_update", [kind(e) for e in events]
    assert last.status_update.status.state == S.TASK_STATE_CANCELED


async def send_once_nonstreaming(base_url, binding, req):
    async with sdk_client(base_url, binding, streaming=False) as client:
        return await send_once(client, req)


@async_test
async def test_subscribe_to_terminal_task_fails(base_url, binding):
    done = await send_once_nonstreaming(base_url, binding, send_request(text_message("done")))
    async with sdk_client(base_url, binding, streaming=True) as client:
        with pytest.raises(UnsupportedOperationError):
            await collect(client.subscribe(pb.SubscribeToTaskRequest(id=done.task.id)))


# --------------------------------------------------------------------------------------------
# Get / list
# --------------------------------------------------------------------------------------------


@async_test
async def test_get_task(base_url, binding):
    async with sdk_client(base_url, binding, streaming=False) as client:
        sent = (await send_once(client, send_request(text_message("get me")))).task
        got = await client.get_task(pb.GetTaskRequest(id=sent.id))
        assert got.id == sent.id
        assert got.context_id == sent.context_id
        assert got.status.state == S.TASK_STATE_COMPLETED
        assert [a.name for a in got.artifacts] == ["echo"]
        assert len(got.history) >= 1
        assert got.history[0].role == pb.Role.ROLE_USER
        limited = await client.get_task(pb.GetTaskRequest(id=sent.id, history_length=1))
        assert len(limited.history) <= 1
        with pytest.raises(TaskNotFoundError):
            await client.get_task(pb.GetTaskRequest(id=str(uuid.uuid4())))


@async_test
async def test_list_tasks(base_url, binding):
    context_id = str(uuid.uuid4())
    async with sdk_client(base_url, binding, streaming=False) as client:
        ids = []
        for i in range(3):
            event = await send_once(
                client, send_request(text_message(f"list {i}", context_id=context_id))
            )
            assert event.task.context_id == context_id
            ids.append(event.task.id)

        page1 = await client.list_tasks(pb.ListTasksRequest(context_id=context_id, page_size=2))
        assert page1.total_size == 3
        assert page1.page_size == 2
        assert len(page1.tasks) == 2
        assert page1.next_page_token
        page2 = await client.list_tasks(
            pb.ListTasksRequest(context_id=context_id, page_size=2, page_token=page1.next_page_token)
        )
        assert len(page2.tasks) == 1
        assert page2.next_page_token == ""
        listed = [t.id for t in page1.tasks] + [t.id for t in page2.tasks]
        assert sorted(listed) == sorted(ids)
        # Newest first.
        assert listed == list(reversed(ids)), (listed, ids)
        # Artifacts only when asked for.
        assert all(len(t.artifacts) == 0 for t in page1.tasks)
        with_artifacts = await client.list_tasks(
            pb.ListTasksRequest(context_id=context_id, include_artifacts=True)
        )
        assert all([a.name for a in t.artifacts] == ["echo"] for t in with_artifacts.tasks)
        # Status filter.
        completed = await client.list_tasks(
            pb.ListTasksRequest(context_id=context_id, status=S.TASK_STATE_COMPLETED)
        )
        assert completed.total_size == 3
        working = await client.list_tasks(
            pb.ListTasksRequest(context_id=context_id, status=S.TASK_STATE_WORKING)
        )
        assert working.total_size == 0 and len(working.tasks) == 0


# --------------------------------------------------------------------------------------------
# Cancel
# --------------------------------------------------------------------------------------------


@async_test
async def test_cancel(base_url, binding):
    async with sdk_client(base_url, binding, streaming=False) as client:
        started = await send_once(
            client,
            send_request(scenario_message(end="hang"), tenant="scenario", return_immediately=True),
        )
        assert kind(started) == "task"
        task_id = started.task.id
        assert started.task.status.state in (S.TASK_STATE_SUBMITTED, S.TASK_STATE_WORKING), (
            state_name(started.task.status.state)
        )
        canceled = await client.cancel_task(pb.CancelTaskRequest(id=task_id))
        assert canceled.id == task_id
        assert canceled.status.state == S.TASK_STATE_CANCELED, state_name(canceled.status.state)
        got = await client.get_task(pb.GetTaskRequest(id=task_id))
        assert got.status.state == S.TASK_STATE_CANCELED
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(pb.CancelTaskRequest(id=task_id))
        with pytest.raises(TaskNotFoundError):
            await client.cancel_task(pb.CancelTaskRequest(id=str(uuid.uuid4())))


@async_test
async def test_cancel_while_streaming(base_url, binding):
    """A stream of a hanging task ends with CANCELED when another call cancels it."""
    async with sdk_client(base_url, binding, streaming=True) as streamer, sdk_client(
        base_url, binding, streaming=False
    ) as canceler:
        events = []
        stream = streamer.send_message(send_request(scenario_message(end="hang"), tenant="scenario"))
        async for event in stream:
            events.append(event)
            if kind(event) == "status_update" and event.status_update.status.state == S.TASK_STATE_WORKING:
                task = await canceler.cancel_task(pb.CancelTaskRequest(id=events[0].task.id))
                assert task.status.state == S.TASK_STATE_CANCELED
    assert kind(events[0]) == "task"
    assert kind(events[-1]) == "status_update", [kind(e) for e in events]
    assert events[-1].status_update.status.state == S.TASK_STATE_CANCELED


# --------------------------------------------------------------------------------------------
# Push-notification configs
# --------------------------------------------------------------------------------------------


@async_test
async def test_push_config_crud(base_url, binding):
    async with sdk_client(base_url, binding, streaming=False) as client:
        task = (await send_once(client, send_request(text_message("push")))).task

        # A webhook inside the network is refused when the config is created (SSRF guard).
        with pytest.raises(InvalidParamsError):
            await client.create_task_push_notification_config(
                pb.TaskPushNotificationConfig(task_id=task.id, url="http://127.0.0.1:9/hook")
            )

        named = await client.create_task_push_notification_config(
            pb.TaskPushNotificationConfig(
                task_id=task.id,
                id="interop-1",
                url="https://hooks.example.com/hook",
                token="tok-1",
                authentication=pb.AuthenticationInfo(scheme="Bearer", credentials="secret"),
            )
        )
        assert named.id == "interop-1"
        assert named.task_id == task.id
        assert named.url == "https://hooks.example.com/hook"
        assert named.token == "tok-1"
        assert named.authentication.scheme == "Bearer"

        minted = await client.create_task_push_notification_config(
            pb.TaskPushNotificationConfig(task_id=task.id, url="https://example.invalid/a2a")
        )
        assert minted.id, "the gateway mints an id when none is given"
        assert minted.task_id == task.id

        got = await client.get_task_push_notification_config(
            pb.GetTaskPushNotificationConfigRequest(task_id=task.id, id="interop-1")
        )
        assert got.id == "interop-1" and got.url == named.url and got.token == "tok-1"

        listed = await client.list_task_push_notification_configs(
            pb.ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert sorted(c.id for c in listed.configs) == sorted(["interop-1", minted.id])
        assert all(c.task_id == task.id for c in listed.configs)

        paged = await client.list_task_push_notification_configs(
            pb.ListTaskPushNotificationConfigsRequest(task_id=task.id, page_size=1)
        )
        assert len(paged.configs) == 1 and paged.next_page_token
        rest = await client.list_task_push_notification_configs(
            pb.ListTaskPushNotificationConfigsRequest(
                task_id=task.id, page_size=1, page_token=paged.next_page_token
            )
        )
        assert len(rest.configs) == 1 and rest.configs[0].id != paged.configs[0].id

        await client.delete_task_push_notification_config(
            pb.DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="interop-1")
        )
        after = await client.list_task_push_notification_configs(
            pb.ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert [c.id for c in after.configs] == [minted.id]
        with pytest.raises(TaskNotFoundError):
            await client.get_task_push_notification_config(
                pb.GetTaskPushNotificationConfigRequest(task_id=task.id, id="interop-1")
            )
        with pytest.raises(TaskNotFoundError):
            await client.create_task_push_notification_config(
                pb.TaskPushNotificationConfig(task_id=str(uuid.uuid4()), url="https://hooks.example.com/x")
            )


@async_test
async def test_push_config_in_send(base_url, binding):
    """A config given with SendMessage is stored on the new task."""
    async with sdk_client(base_url, binding, streaming=False) as client:
        push = pb.TaskPushNotificationConfig(id="with-send", url="https://hooks.example.com/hook", token="t")
        task = (await send_once(client, send_request(text_message("push on send"), push=push))).task
        listed = await client.list_task_push_notification_configs(
            pb.ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert [c.id for c in listed.configs] == ["with-send"], listed
        assert listed.configs[0].url == "https://hooks.example.com/hook"


# --------------------------------------------------------------------------------------------
# Errors and what the SDK sends
# --------------------------------------------------------------------------------------------


@async_test
async def test_unknown_tenant_is_invalid_params(base_url, binding):
    async with sdk_client(base_url, binding, streaming=False) as client:
        with pytest.raises(InvalidParamsError):
            await send_once(client, send_request(text_message("who?"), tenant="no-such-agent"))


@async_test
async def test_sdk_sends_a2a_version(base_url, binding):
    """Every request the SDK 1.x sends carries A2A-Version: 1.0 (header or gRPC metadata)."""
    wire = Wire()
    async with sdk_client(base_url, binding, streaming=True, wire=wire) as client:
        await collect(client.send_message(send_request(text_message("v"))))
        task = await collect(client.send_message(send_request(text_message("v2"))))
        await client.get_task(pb.GetTaskRequest(id=task[0].task.id))
    # The card fetch goes through the same httpx client.
    assert wire.http[0][1] == "/.well-known/agent-card.json"
    for method, path, headers in wire.http:
        assert headers.get("a2a-version") == "1.0", (method, path, headers)
    if binding == "GRPC":
        assert [m for m, _ in wire.grpc] == [
            "/lf.a2a.v1.A2AService/SendStreamingMessage",
            "/lf.a2a.v1.A2AService/SendStreamingMessage",
            "/lf.a2a.v1.A2AService/GetTask",
        ]
        for method, md in wire.grpc:
            assert md.get("a2a-version") == "1.0", (method, md)
    else:
        calls = wire.http[1:]
        assert len(calls) == 3
        for method, path, headers in calls:
            assert headers.get("content-type", "application/json").startswith("application/json")
        if binding == "JSONRPC":
            assert all(m == "POST" and p == "/a2a/jsonrpc" for m, p, _ in calls), calls
            assert calls[0][2].get("accept") == "text/event-stream"
        else:
            assert [(m, p.split("/a2a/rest", 1)[1]) for m, p, _ in calls][:2] == [
                ("POST", "/message:stream"),
                ("POST", "/message:stream"),
            ]
            assert calls[2][0] == "GET" and calls[2][1].startswith("/a2a/rest/tasks/")


# --------------------------------------------------------------------------------------------
# Extended agent card and extensions (enabled by interop/python/gateway.toml)
# --------------------------------------------------------------------------------------------

INTEROP_EXTENSION = "urn:a2a-gateway:interop"


@async_test
async def test_no_extended_card_without_auth(base_url, binding):
    """The open gateway has an [extended_card] but no [auth]: its card declares no extended card
    (the 1.0 card a 1.x client reads has no 0.3 members either), so the SDK answers with the
    public card and never asks; the gateway refuses a direct GetExtendedAgentCard."""
    wire = Wire()
    async with sdk_client(base_url, binding, streaming=False, wire=wire) as client:
        assert not client._card.capabilities.extended_agent_card
        card = await client.get_extended_agent_card(pb.GetExtendedAgentCardRequest())
    assert card.description != "interop: the extended card"
    assert "interop-private" not in {s.id for s in card.skills}
    assert wire.http[1:] == [] and wire.grpc == [], (wire.http, wire.grpc)
    async with httpx.AsyncClient(timeout=10) as http:
        headers = {"A2A-Version": "1.0"}
        raw = (await http.get(f"{base_url}/.well-known/agent-card.json", headers=headers)).json()
        assert "protocolVersion" not in raw and "url" not in raw, raw
        if binding == "HTTP+JSON":
            r = await http.get(f"{base_url}/a2a/rest/extendedAgentCard", headers=headers)
            assert r.status_code == 400, r.text
            assert r.json()["error"]["details"][0]["reason"] == "UNSUPPORTED_OPERATION", r.text
        elif binding == "JSONRPC":
            body = {"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard"}
            r = await http.post(f"{base_url}/a2a/jsonrpc", json=body, headers=headers)
            assert r.json()["error"]["code"] == -32004, r.text


@async_test
async def test_extension_activation(base_url, binding):
    """A2A-Extensions sent through the SDK's service parameters is accepted and echoed."""
    wire = Wire()
    async with sdk_client(base_url, binding, streaming=False, wire=wire) as client:
        assert INTEROP_EXTENSION in [e.uri for e in client._card.capabilities.extensions]
        ctx = ClientCallContext(
            service_parameters=ServiceParametersFactory.create(
                [with_a2a_extensions([INTEROP_EXTENSION])]
            )
        )
        event = await send_once(client, send_request(text_message("ext")), context=ctx)
        assert event.task.status.state == S.TASK_STATE_COMPLETED
    if binding == "GRPC":
        method, md = wire.grpc[-1]
        assert md.get("a2a-extensions") == INTEROP_EXTENSION, md
        method, initial = wire.grpc_responses[-1]
        assert initial.get("a2a-extensions") == INTEROP_EXTENSION, (method, initial)
    else:
        method, path, headers = wire.http[-1]
        assert headers.get("a2a-extensions") == INTEROP_EXTENSION, headers
        method, path, status, headers = wire.http_responses[-1]
        assert status == 200 and headers.get("a2a-extensions") == INTEROP_EXTENSION, (path, headers)
