"""``POST /v1/completions`` and ``POST /v1/chat/completions`` on local generation models.

Decode and validate at the edge (unknown or unsupported fields are a 400 naming the field),
then run one generation per prompt and choice: streamed as server-sent events as tokens are
produced, or collected into one response. Every error that can happen before the first byte
(bad parameters, unknown model, context overflow, overload) is a proper status code; one that
happens later is reported in-band on the stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import msgspec
from aiohttp import web

from sluiceway.api.context import MODEL, ApiContext
from sluiceway.api.errors import reason_of
from sluiceway.api.generation_requests import Plan, plan_chat, plan_completion
from sluiceway.api.generation_shapes import ChatShape, Choice, CompletionShape, Shape
from sluiceway.api.sse import EventStream
from sluiceway.errors import EngineError, SluicewayError
from sluiceway.providers.generation import Delta, GenerateOptions, Generation, Generator, Prompt


def _jobs(plan: Plan) -> list[tuple[int, Prompt, GenerateOptions]]:
    """(choice index, prompt, options) per generation; choice j of n gets seed + j."""
    out = []
    for i, prompt in enumerate(plan.prompts):
        for j in range(plan.n):
            options = plan.options
            if j and options.sampling.seed is not None:
                sampling = replace(options.sampling, seed=options.sampling.seed + j)
                options = replace(options, sampling=sampling)
            out.append((i * plan.n + j, prompt, options))
    return out


def _encode(obj: dict[str, Any]) -> bytes:
    return msgspec.json.encode(obj)


async def _serve(
    request: web.Request, ctx: ApiContext, plan: Plan, kind: type[Shape]
) -> web.StreamResponse:
    generator = ctx.registry.generator(plan.model)
    request[MODEL] = plan.model
    deadline = ctx.deadline(request.headers.get("X-Request-Timeout"))
    jobs = _jobs(plan)
    if len(jobs) == 1:
        index, prompt, options = jobs[0]
        async with generator.generate(prompt, options, deadline) as gen:
            shape = kind(plan.model, gen.token_bytes, include_usage=plan.include_usage)
            if plan.stream:
                return await _stream_one(request, ctx, plan, shape, gen)
            choice = await _collect(gen, index)
            return web.Response(body=_encode(shape.full([choice])), content_type="application/json")
    return await _serve_many(request, ctx, plan, kind, generator, jobs, deadline)


def _start(gen: Generation, index: int) -> Choice:
    return Choice(
        index=index,
        prompt_tokens=gen.prompt_tokens,
        cached_tokens=gen.cached_tokens,
        prefix=gen.prompt_text if gen.echo else "",
    )


def _end(choice: Choice, gen: Generation) -> Choice:
    choice.finish_reason = gen.finish_reason
    choice.completion_tokens = gen.completion_tokens
    return choice


async def _collect(gen: Generation, index: int) -> Choice:
    choice = _start(gen, index)
    async for delta in gen:
        choice.text.append(delta.text)
        if delta.logprob is not None:
            choice.logprobs.append(delta.logprob)
    return _end(choice, gen)


async def _stream_one(
    request: web.Request, ctx: ApiContext, plan: Plan, shape: Shape, gen: Generation
) -> web.StreamResponse:
    sse = EventStream(request)
    await sse.open()
    choice = _start(gen, 0)
    try:
        opening = shape.opening(0, choice.prefix)
        if opening is not None:
            await sse.send(_encode(opening))
        async for delta in gen:
            if delta.text or delta.logprob is not None:
                await sse.send(_encode(shape.chunk(0, delta.text, delta.logprob, None)))
        _end(choice, gen)
        await sse.send(_encode(shape.chunk(0, "", None, choice.finish_reason)))
        if plan.include_usage:
            chunk = shape.usage_chunk(gen.prompt_tokens, gen.completion_tokens, gen.cached_tokens)
            await sse.send(_encode(chunk))
        await sse.done()
    except SluicewayError as e:
        ctx.metrics.failures.labels(plan.model, reason_of(e)).inc()
        await sse.fail(e)
    except ConnectionResetError:  # the client left; leaving `generate` cancels the job
        ctx.metrics.failures.labels(plan.model, "cancelled").inc()
    return sse.response


# --- several generations in one request --------------------------------------------------

_Item = tuple[int, Delta | Generation | SluicewayError]


async def _serve_many(
    request: web.Request,
    ctx: ApiContext,
    plan: Plan,
    kind: type[Shape],
    generator: Generator,
    jobs: list[tuple[int, Prompt, GenerateOptions]],
    deadline: float,
) -> web.StreamResponse:
    """One task per generation, all owned by this handler; their output merges in a queue.

    Each task consumes its own generation, so none can hold a slot idle while another waits
    for one. The response starts once every generation is admitted, so admission errors still
    get their status code.
    """
    loop = asyncio.get_running_loop()
    out: asyncio.Queue[_Item] = asyncio.Queue()
    admitted: list[asyncio.Future[Generation]] = [loop.create_future() for _ in jobs]
    tasks = [
        asyncio.create_task(_worker(generator, job, deadline, admitted[k], out))
        for k, job in enumerate(jobs)
    ]
    try:
        gens = [await f for f in admitted]
        shape = kind(plan.model, gens[0].token_bytes, include_usage=plan.include_usage)
        choices = {index: _start(gen, index) for (index, _, _), gen in zip(jobs, gens, strict=True)}
        send: Callable[[bytes], Awaitable[None]] | None = None
        sse: EventStream | None = None
        if plan.stream:
            sse = EventStream(request)
            await sse.open()
            send = sse.send
        try:
            if send is not None:
                for c in choices.values():
                    opening = shape.opening(c.index, c.prefix)
                    if opening is not None:
                        await send(_encode(opening))
            pending = len(jobs)
            while pending:
                index, item = await out.get()
                choice = choices[index]
                if isinstance(item, SluicewayError):
                    raise item
                if isinstance(item, Generation):
                    pending -= 1
                    _end(choice, item)
                    if send is not None:
                        await send(_encode(shape.chunk(index, "", None, choice.finish_reason)))
                    continue
                if send is not None:
                    if item.text or item.logprob is not None:
                        await send(_encode(shape.chunk(index, item.text, item.logprob, None)))
                else:
                    choice.text.append(item.text)
                    if item.logprob is not None:
                        choice.logprobs.append(item.logprob)
        except SluicewayError as e:
            if sse is None:
                raise
            ctx.metrics.failures.labels(plan.model, reason_of(e)).inc()
            await sse.fail(e)
            return sse.response
        except ConnectionResetError:  # the client left; the finally below cancels the jobs
            ctx.metrics.failures.labels(plan.model, "cancelled").inc()
            if sse is None:
                raise
            return sse.response
        ordered = [choices[i] for i in sorted(choices)]
        if sse is None:
            return web.Response(body=_encode(shape.full(ordered)), content_type="application/json")
        if plan.include_usage:
            total = shape.full(ordered)["usage"]
            await sse.send(_encode(shape.usage_chunk(
                total["prompt_tokens"], total["completion_tokens"],
                total["prompt_tokens_details"]["cached_tokens"],
            )))  # fmt: skip
        await sse.done()
        return sse.response
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for f in admitted:  # mark every outcome as seen
            if f.done() and not f.cancelled():
                f.exception()


async def _worker(
    generator: Generator,
    job: tuple[int, Prompt, GenerateOptions],
    deadline: float,
    admitted: asyncio.Future[Generation],
    out: asyncio.Queue[_Item],
) -> None:
    index, prompt, options = job
    try:
        async with generator.generate(prompt, options, deadline) as gen:
            admitted.set_result(gen)
            async for delta in gen:
                out.put_nowait((index, delta))
            out.put_nowait((index, gen))
    except Exception as e:
        error = e if isinstance(e, SluicewayError) else EngineError(f"generation failed: {e}")
        if admitted.done():
            out.put_nowait((index, error))
        else:
            admitted.set_exception(error)
    finally:
        if not admitted.done():
            admitted.cancel()


async def handle_completions(
    request: web.Request, body: bytes, ctx: ApiContext
) -> web.StreamResponse:
    return await _serve(request, ctx, plan_completion(body), CompletionShape)


async def handle_chat(request: web.Request, body: bytes, ctx: ApiContext) -> web.StreamResponse:
    return await _serve(request, ctx, plan_chat(body), ChatShape)


ENDPOINTS: dict[str, Callable[[web.Request, bytes, ApiContext], Awaitable[web.StreamResponse]]] = {
    "completions": handle_completions,
    "chat/completions": handle_chat,
}

__all__ = ["ENDPOINTS", "handle_chat", "handle_completions"]
