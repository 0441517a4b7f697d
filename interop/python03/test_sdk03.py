"""Interop: the official A2A Python SDK 0.3.x as a client of a2a-gateway's 0.3 dialect.

Every test runs once per binding (JSONRPC, HTTP+JSON; GRPC when selected, see conftest.py).
Each builds an SDK client the way a 0.3 application does: the public card from
`A2ACardResolver` (the gateway serves one card to 0.3 and 1.0 clients), then
`ClientFactory(ClientConfig(supported_transports=[binding], use_client_preference=True))`.
The SDK sends no `A2A-Version` header: the 0.3 method names (JSON-RPC) and `/v1/...` paths
(HTTP+JSON) select the dialect.

The gateway serves two built-in agents: `echo` (default) and `scenario`, reached here by the
message metadata's skill hint (`{"skill": "scenario"}`; 0.3 has no tenant) and driven by a data
part {"chunks": N, "delayMs": M, "end": E}.
"""

import asyncio
import functools
import uuid

import grpc
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientHTTPError, A2AClientJSONRPCError
from a2a.client.transports.grpc import GrpcTransport
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.client.transports.rest import RestTransport
from a2a.grpc import a2a_pb2
from a2a.types import (
    DataPart,
    DeleteTaskPushNotificationConfigParams,
    DeleteTaskPushNotificationConfigRequest,
    DeleteTaskPushNotificationConfigResponse,
    GetTaskPushNotificationConfigParams,
    ListTaskPushNotificationConfigParams,
    ListTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigResponse,
    Message,
    MessageSendConfiguration,
    MessageSendParams,
    Part,
    PushNotificationAuthenticationInfo,
    PushNotificationConfig,
    Role,
    Task,
    TaskIdParams,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TaskState,
    TaskStatusUpdateEvent,
    TextPart,
)
from google.protobuf.json_format import ParseDict

TRANSPORT_CLASS = {
    "JSONRPC": JsonRpcTransport,
    "HTTP+JSON": RestTransport,
    "GRPC": GrpcTransport,
}

TEST_TIMEOUT_SECS = 60


def async_test(fn):
    """Run an `async def` test body in a fresh event loop, under a deadline."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        async def bounded():
            return await asyncio.wait_for(fn(*args, **kwargs), TEST_TIMEOUT_SECS)

        return asyncio.run(bounded())

    return wrapper


def text(t):
    return Message(
        role=Role.user,
        message_id=str(uuid.uuid4()),
        parts=[Part(root=TextPart(text=t))],
    )


def script(s, task_id=None):
    return Message(
        role=Role.user,
        message_id=str(uuid.uuid4()),
        task_id=task_id,
        parts=[Part(root=TextPart(text="run")), Part(root=DataPart(data=s))],
        metadata={"skill": "scenario"},
    )


class Session:
    """An SDK client of one binding, and the raw HTTP client it shares."""

    def __init__(self, base_url, binding, *, streaming=False, polling=False, token=None):
        self.base_url = base_url
        self.binding = binding
        # A bearer token travels as an HTTP header, and as gRPC metadata through the channel
        # (the 0.3 SDK's gRPC transport takes no credentials of its own).
        auth = {"authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.AsyncClient(timeout=30, headers=auth)
        interceptors = [_GrpcBearer(token)] if token else None
        self.config = ClientConfig(
            streaming=streaming,
            polling=polling,
            httpx_client=self.http,
            grpc_channel_factory=lambda target: grpc.aio.insecure_channel(
                target, interceptors=interceptors
            ),
            supported_transports=[binding],
            use_client_preference=True,
        )

    async def __aenter__(self):
        self.card = await A2ACardResolver(self.http, self.base_url).get_agent_card()
        self.client = ClientFactory(self.config).create(self.card)
        transport = self.client._transport
        assert isinstance(transport, TRANSPORT_CLASS[self.binding]), type(transport)
        return self

    async def __aexit__(self, *exc):
        await self.client.close()
        await self.http.aclose()

    async def send(self, message, configuration=None):
        """The one result of a non-streaming send: a Task or a Message."""
        results = [r async for r in self.client.send_message(message, configuration=configuration)]
        assert len(results) == 1, results
        r = results[0]
        return r[0] if isinstance(r, tuple) else r

    async def events(self, message):
        """Every event of a streaming send (Task snapshots and update events)."""
        out = []
        async for r in self.client.send_message(message):
            if isinstance(r, Message):
                out.append(r)
            else:
                task, update = r
                out.append(update if update is not None else task)
        return out


class _GrpcBearer(grpc.aio.UnaryUnaryClientInterceptor):
    """Adds `authorization: Bearer <token>` to every unary call."""

    def __init__(self, token):
        self.token = token

    async def intercept_unary_unary(self, continuation, client_call_details, request):
        metadata = list(client_call_details.metadata or [])
        metadata.append(("authorization", f"Bearer {self.token}"))
        details = client_call_details._replace(metadata=grpc.aio.Metadata(*metadata))
        return await continuation(details, request)


# The client of the interop issuer (interop/python/issuer.py).
ISSUER_CLIENT = ("interop", "interop-secret")


async def issuer_token(issuer_url, scope="a2a:write"):
    """An access token from the interop issuer (OAuth2 client credentials)."""
    async with httpx.AsyncClient(timeout=10) as http:
        discovery = (await http.get(f"{issuer_url}/.well-known/openid-configuration")).json()
        resp = await http.post(
            discovery["token_endpoint"],
            auth=ISSUER_CLIENT,
            data={"grant_type": "client_credentials", "scope": scope, "subject": "interop03"},
        )
        resp.raise_for_status()
        return resp.json()["access_token"]


def error_code(exc):
    """The binding's error code: JSON-RPC's code, HTTP+JSON's status or gRPC's status name."""
    if isinstance(exc, A2AClientJSONRPCError):
        return exc.error.code
    if isinstance(exc, A2AClientHTTPError):
        return exc.status_code
    if isinstance(exc, grpc.aio.AioRpcError):
        return exc.code().name
    raise AssertionError(f"unexpected error {exc!r}")


NOT_FOUND = {"JSONRPC": -32001, "HTTP+JSON": 404, "GRPC": "NOT_FOUND"}
NOT_CANCELABLE = {"JSONRPC": -32002, "HTTP+JSON": 400, "GRPC": "FAILED_PRECONDITION"}
INVALID_PARAMS = {"JSONRPC": -32602, "HTTP+JSON": 400, "GRPC": "INVALID_ARGUMENT"}


@async_test
async def test_one_card_for_both_generations(base_url):
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()
        legacy = await A2ACardResolver(http, base_url, "/.well-known/agent.json").get_agent_card()
    assert card.protocol_version.startswith("0.3")
    assert card.url == f"{base_url}/a2a/jsonrpc"
    assert card.preferred_transport == "JSONRPC"
    transports = {i.transport: i.url for i in card.additional_interfaces}
    assert transports["HTTP+JSON"] == f"{base_url}/a2a/rest"
    # The open gateway has no [auth]: its [extended_card] is neither declared nor served.
    assert not card.supports_authenticated_extended_card
    assert legacy == card


@async_test
async def test_send_get_and_message_replies(base_url, binding):
    async with Session(base_url, binding) as s:
        task = await s.send(text("hello 0.3"))
        assert isinstance(task, Task)
        assert task.status.state == TaskState.completed
        assert task.artifacts[0].parts[0].root.text == "hello 0.3"
        got = await s.client.get_task(TaskQueryParams(id=task.id, history_length=1))
        assert got.id == task.id and len(got.history) == 1
        reply = await s.send(script({"end": "message"}))
        assert isinstance(reply, Message) and reply.role == Role.agent
        with pytest.raises(Exception) as e:
            await s.client.get_task(TaskQueryParams(id="no-such-task"))
        assert error_code(e.value) == NOT_FOUND[binding]


@async_test
async def test_streaming_send_ends_with_a_final_event(base_url, binding):
    async with Session(base_url, binding, streaming=True) as s:
        events = await s.events(script({"chunks": 2}))
    assert isinstance(events[0], Task), events
    last = events[-1]
    assert isinstance(last, TaskStatusUpdateEvent), events
    assert last.final and last.status.state == TaskState.completed
    assert sum(1 for e in events if isinstance(e, TaskStatusUpdateEvent) and e.final) == 1


@async_test
async def test_cancel_and_resubscribe(base_url, binding):
    async with Session(base_url, binding) as s:
        asked = await s.send(script({"end": "input-required"}))
        assert asked.status.state == TaskState.input_required
        canceled = await s.client.cancel_task(TaskIdParams(id=asked.id))
        assert canceled.status.state == TaskState.canceled
        with pytest.raises(Exception) as e:
            await s.client.cancel_task(TaskIdParams(id=asked.id))
        assert error_code(e.value) == NOT_CANCELABLE[binding]
    async with Session(base_url, binding, streaming=True, polling=True) as s:
        running = await s.client._transport.send_message(
            _params(script({"chunks": 3, "delayMs": 150}), blocking=False)
        )
        assert isinstance(running, Task)
        events = []
        async for task, update in s.client.resubscribe(TaskIdParams(id=running.id)):
            events.append(update if update is not None else task)
    assert isinstance(events[-1], TaskStatusUpdateEvent), events
    assert events[-1].final and events[-1].status.state == TaskState.completed


def _params(message, *, blocking):
    return MessageSendParams(message=message, configuration=MessageSendConfiguration(blocking=blocking))


@async_test
async def test_push_config_crud(base_url, binding):
    async with Session(base_url, binding) as s:
        task = await s.send(text("push"))
        # A webhook inside the network is refused when the config is created (SSRF guard).
        inside = TaskPushNotificationConfig(
            task_id=task.id,
            push_notification_config=PushNotificationConfig(url="http://127.0.0.1:9/hook"),
        )
        with pytest.raises(Exception) as e:
            await s.client.set_task_callback(inside)
        assert error_code(e.value) == INVALID_PARAMS[binding]
        cfg = TaskPushNotificationConfig(
            task_id=task.id,
            push_notification_config=PushNotificationConfig(
                id="hook-1",
                url="https://hooks.example.com/hook",
                token="tok",
                authentication=PushNotificationAuthenticationInfo(schemes=["Bearer"], credentials="s"),
            ),
        )
        created = await s.client.set_task_callback(cfg)
        assert created.task_id == task.id
        assert created.push_notification_config.id == "hook-1"
        assert created.push_notification_config.authentication.schemes == ["Bearer"]
        got = await s.client.get_task_callback(
            GetTaskPushNotificationConfigParams(id=task.id, push_notification_config_id="hook-1")
        )
        assert got.push_notification_config.url == "https://hooks.example.com/hook"
        assert got.push_notification_config.token == "tok"
        # The 0.3.x clients have no list or delete: the SDK's own request and response types,
        # over the wire the SDK's transport speaks.
        if binding == "JSONRPC":
            url = f"{base_url}/a2a/jsonrpc"
            listed = await _rpc(s.http, url, ListTaskPushNotificationConfigRequest(
                id=1, params=ListTaskPushNotificationConfigParams(id=task.id)))
            listed = ListTaskPushNotificationConfigResponse.model_validate(listed).root
            assert [c.push_notification_config.id for c in listed.result] == ["hook-1"]
            deleted = await _rpc(s.http, url, DeleteTaskPushNotificationConfigRequest(
                id=2, params=DeleteTaskPushNotificationConfigParams(
                    id=task.id, push_notification_config_id="hook-1")))
            assert DeleteTaskPushNotificationConfigResponse.model_validate(deleted).root.result is None
        else:
            base = f"{base_url}/a2a/rest/v1/tasks/{task.id}/pushNotificationConfigs"
            r = await s.http.get(base)
            r.raise_for_status()
            listed = ParseDict(r.json(), a2a_pb2.ListTaskPushNotificationConfigResponse())
            assert [c.push_notification_config.id for c in listed.configs] == ["hook-1"]
            r = await s.http.delete(f"{base}/hook-1")
            assert r.status_code == 200
        with pytest.raises(Exception) as e:
            await s.client.get_task_callback(
                GetTaskPushNotificationConfigParams(id=task.id, push_notification_config_id="hook-1")
            )
        assert error_code(e.value) == NOT_FOUND[binding]


async def _rpc(http, url, request):
    r = await http.post(url, json=request.model_dump(mode="json", exclude_none=True))
    r.raise_for_status()
    return r.json()


@async_test
async def test_extended_card(auth_url, issuer_url, binding):
    token = await issuer_token(issuer_url)
    async with Session(auth_url, binding, token=token) as s:
        assert s.card.supports_authenticated_extended_card
        card = await s.client.get_card()
    assert card.description == "interop: the extended card"
    assert any(skill.id == "interop-private" for skill in card.skills)


@async_test
async def test_no_extended_card_without_auth(base_url, binding):
    """The open gateway (no [auth]) answers the 0.3 extended-card calls with an error."""
    async with httpx.AsyncClient(timeout=10) as http:
        if binding == "JSONRPC":
            body = {"jsonrpc": "2.0", "id": 1, "method": "agent/getAuthenticatedExtendedCard"}
            r = await http.post(f"{base_url}/a2a/jsonrpc", json=body)
            assert r.json()["error"]["code"] == -32007, r.text
        elif binding == "HTTP+JSON":
            r = await http.get(f"{base_url}/a2a/rest/v1/card")
            assert r.status_code == 400, r.text
    # The SDK does not ask: the card declares no extended card.
    async with Session(base_url, binding) as s:
        card = await s.client.get_card()
    assert card.description != "interop: the extended card"


@async_test
async def test_a_0_3_task_is_a_1_0_task(base_url, binding):
    async with Session(base_url, binding) as s:
        task = await s.send(script({"end": "input-required"}))
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task.id}}
        r = await s.http.post(f"{base_url}/a2a/jsonrpc", json=body, headers={"A2A-Version": "1.0"})
        got = r.json()["result"]
        assert got["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        body = {"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": task.id}}
        r = await s.http.post(f"{base_url}/a2a/jsonrpc", json=body, headers={"A2A-Version": "1.0"})
        assert r.json()["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        again = await s.client.get_task(TaskQueryParams(id=task.id))
        assert again.status.state == TaskState.canceled
