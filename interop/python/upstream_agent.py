"""An upstream A2A agent built on the official Python SDK (a2a-sdk 1.x), for the gateway's
end-to-end tests: the gateway fronts it as an `[[agents]]` entry.

Serves JSON-RPC at /a2a/jsonrpc (1.0, and 0.3 `message/send` on the same endpoint), HTTP+JSON
under /a2a/rest and the card at /.well-known/agent-card.json on one port (uvicorn), and prints
`listening on <port>` once it accepts connections.

What it does with a message's text:
  "ask ..."  -> INPUT_REQUIRED; the next message on the task completes it
  "hang ..." -> WORKING until canceled
  "echo ..." -> WORKING, one artifact with the text, COMPLETED (the load tests' peer of the
                gateway's built-in echo agent)
  otherwise  -> WORKING, three artifact chunks ("py-output", 50 ms apart), COMPLETED

Usage: python upstream_agent.py [port] [JSONRPC|HTTP+JSON ...]   (interfaces, in card order)
"""

import asyncio
import socket
import sys

import uvicorn
from a2a.helpers import new_task
from a2a.helpers.proto_helpers import get_message_text, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue_v2 import EventQueue
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Role,
    TaskState,
)
from starlette.applications import Starlette


class UpstreamExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = get_message_text(context.message) if context.message else ""
        task = context.current_task
        continuing = task is not None
        if task is None:
            task = new_task(context.task_id, context.context_id, TaskState.TASK_STATE_SUBMITTED,
                            history=[context.message])
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        if continuing:
            await updater.add_artifact([new_text_part(f"thanks: {text}")], artifact_id="py-answer")
            await updater.complete()
            return
        if text.startswith("ask"):
            question = new_text_message("what else?", context_id=task.context_id,
                                        task_id=task.id, role=Role.ROLE_AGENT)
            await updater.requires_input(question)
            return
        if text.startswith("hang"):
            await asyncio.sleep(3600)
            return
        if text.startswith("echo"):
            await updater.add_artifact([new_text_part(text)], artifact_id="py-echo")
            await updater.complete()
            return
        for i in range(3):
            await updater.add_artifact([new_text_part(f"chunk {i}")], artifact_id="py-output",
                                       append=i > 0, last_chunk=i == 2)
            await asyncio.sleep(0.05)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        updater = TaskUpdater(event_queue, task.id if task else context.task_id,
                              task.context_id if task else context.context_id)
        await updater.cancel()


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] != "0" else 0
    bindings = sys.argv[2:] or ["JSONRPC", "HTTP+JSON"]
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    urls = {"JSONRPC": f"{base}/a2a/jsonrpc", "HTTP+JSON": f"{base}/a2a/rest"}
    card = AgentCard(
        name="python-upstream",
        description="an a2a-sdk agent behind the gateway",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=urls[b], protocol_binding=b, protocol_version="1.0")
            for b in bindings
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="py-chunks", name="Chunks", description="three chunks",
                           tags=["python", "chunks"])],
    )
    handler = DefaultRequestHandlerV2(
        agent_executor=UpstreamExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = (
        create_agent_card_routes(card, cache_control="public, max-age=60")
        + create_jsonrpc_routes(handler, "/a2a/jsonrpc", enable_v0_3_compat=True)
        + create_rest_routes(handler, path_prefix="/a2a/rest")
    )
    app = Starlette(routes=routes)
    config = uvicorn.Config(app, log_level="warning")
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        print(f"listening on {port}", flush=True)
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
