"""Interop: the official A2A Python SDK authenticating to a2a-gateway with bearer tokens.

The gateway at `auth_url` declares one OpenID Connect scheme (`oidc`) and requires the scope
`a2a:write`; `issuer_url` is a real OIDC issuer (issuer.py) with a client-credentials token
endpoint. The SDK gets its credentials the way an application would: from the card's
`securityRequirements`, through its `AuthInterceptor` and a credential store.
"""

import uuid

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientCallContext
from a2a.client.auth.credentials import InMemoryContextCredentialStore
from a2a.client.auth.interceptor import AuthInterceptor
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import TaskNotFoundError

from issuer import CLIENT_ID, CLIENT_SECRET
from test_sdk_interop import (
    Wire,
    async_test,
    kind,
    sdk_client,
    send_once,
    send_request,
    text_message,
)


async def client_credentials_token(issuer_url, *, scope, subject):
    """An access token from the issuer's token endpoint (OAuth2 client credentials)."""
    async with httpx.AsyncClient(timeout=10) as http:
        discovery = (await http.get(f"{issuer_url}/.well-known/openid-configuration")).json()
        resp = await http.post(
            discovery["token_endpoint"],
            auth=(CLIENT_ID, CLIENT_SECRET),
            data={"grant_type": "client_credentials", "scope": scope, "subject": subject},
        )
        resp.raise_for_status()
        return resp.json()["access_token"]


async def session(issuer_url, *, scope="a2a:write", subject=CLIENT_ID):
    """An AuthInterceptor holding a fresh token for a new session, and that session's context."""
    store = InMemoryContextCredentialStore()
    session_id = str(uuid.uuid4())
    token = await client_credentials_token(issuer_url, scope=scope, subject=subject)
    await store.set_credentials(session_id, "oidc", token)
    return AuthInterceptor(store), ClientCallContext(state={"sessionId": session_id})


@async_test
async def test_the_card_declares_the_enforced_scheme(auth_url, binding):
    async with httpx.AsyncClient(timeout=10) as http:
        card = await A2ACardResolver(http, auth_url).get_agent_card()
    assert set(card.security_schemes) == {"oidc"}
    assert card.security_schemes["oidc"].HasField("open_id_connect_security_scheme")
    [requirement] = card.security_requirements
    assert list(requirement.schemes["oidc"].list) == ["a2a:write"]


@async_test
async def test_a_bearer_token_is_accepted(auth_url, issuer_url, binding):
    interceptor, context = await session(issuer_url)
    async with sdk_client(auth_url, binding, streaming=False, interceptors=[interceptor]) as client:
        event = await send_once(client, send_request(text_message("with a token")), context)
        assert kind(event) == "task", event
        assert event.task.status.state == pb.TaskState.TASK_STATE_COMPLETED
        got = await client.get_task(pb.GetTaskRequest(id=event.task.id), context=context)
        assert got.id == event.task.id


@async_test
async def test_a_streamed_task_with_a_token(auth_url, issuer_url, binding):
    interceptor, context = await session(issuer_url)
    async with sdk_client(auth_url, binding, streaming=True, interceptors=[interceptor]) as client:
        events = [e async for e in client.send_message(send_request(text_message("stream")), context=context)]
    assert events[-1].WhichOneof("payload") in ("status_update", "task"), events[-1]
    last = events[-1].status_update.status if kind(events[-1]) == "status_update" else events[-1].task.status
    assert last.state == pb.TaskState.TASK_STATE_COMPLETED


@async_test
async def test_without_a_token_the_call_is_refused(auth_url, binding):
    async with sdk_client(auth_url, binding, streaming=False) as client:
        with pytest.raises(Exception) as refused:
            await send_once(client, send_request(text_message("no token")))
    text = str(refused.value)
    assert "401" in text or "UNAUTHENTICATED" in text or "credentials required" in text, text


@async_test
async def test_a_token_without_the_scope_is_refused(auth_url, issuer_url, binding):
    interceptor, context = await session(issuer_url, scope="a2a:read")
    async with sdk_client(auth_url, binding, streaming=False, interceptors=[interceptor]) as client:
        with pytest.raises(Exception) as refused:
            await send_once(client, send_request(text_message("too little scope")), context)
    text = str(refused.value)
    assert "403" in text or "PERMISSION_DENIED" in text or "insufficient scope" in text, text


@async_test
async def test_another_principal_cannot_see_the_task(auth_url, issuer_url, binding):
    alice, alice_ctx = await session(issuer_url, subject="alice")
    mallory, mallory_ctx = await session(issuer_url, subject="mallory")
    async with sdk_client(auth_url, binding, streaming=False, interceptors=[alice]) as client:
        task = (await send_once(client, send_request(text_message("alice's")), alice_ctx)).task
    async with sdk_client(auth_url, binding, streaming=False, interceptors=[mallory]) as client:
        with pytest.raises(TaskNotFoundError):
            await client.get_task(pb.GetTaskRequest(id=task.id), context=mallory_ctx)
        listed = await client.list_tasks(pb.ListTasksRequest(), context=mallory_ctx)
        assert task.id not in [t.id for t in listed.tasks]


@async_test
async def test_extended_agent_card(auth_url, issuer_url, binding):
    """The authenticated gateway declares an extended card; the SDK fetches it with its token."""
    interceptor, context = await session(issuer_url)
    wire = Wire()
    async with sdk_client(
        auth_url, binding, streaming=False, wire=wire, interceptors=[interceptor]
    ) as client:
        assert client._card.capabilities.extended_agent_card
        public_skills = {s.id for s in client._card.skills}
        assert "interop-private" not in public_skills
        card = await client.get_extended_agent_card(pb.GetExtendedAgentCardRequest(), context=context)
    assert card.description == "interop: the extended card"
    assert "interop-private" in {s.id for s in card.skills}
    assert public_skills <= {s.id for s in card.skills}
    # The SDK only calls the gateway when the card declares capabilities.extendedAgentCard;
    # make sure it did, over the binding under test, with the token.
    if binding == "GRPC":
        [(method, md)] = wire.grpc
        assert method == "/lf.a2a.v1.A2AService/GetExtendedAgentCard"
        assert md.get("authorization", "").startswith("Bearer "), md
    else:
        [(method, path, headers)] = wire.http[1:]
        want = ("POST", "/a2a/jsonrpc") if binding == "JSONRPC" else ("GET", "/a2a/rest/extendedAgentCard")
        assert (method, path) == want
        assert headers.get("authorization", "").startswith("Bearer "), headers


@async_test
async def test_the_extended_card_needs_a_token(auth_url, binding):
    async with sdk_client(auth_url, binding, streaming=False) as client:
        with pytest.raises(Exception) as refused:
            await client.get_extended_agent_card(pb.GetExtendedAgentCardRequest())
    text = str(refused.value)
    assert "401" in text or "UNAUTHENTICATED" in text or "credentials required" in text, text
