"""Monarch's debugger io (``DebugIO``), and a console io over one.

Monarch's ``DebugController`` talks to its user through a :class:`DebugIO`: three
coroutines, ``input(prompt)``, ``output(msg)`` and ``quit()``, run on the controller
actor's event loop.  :class:`DebugStdIO` is the controller process's stdin/stdout
(Monarch's default, and what a subclass of the controller sets to drive the
debugger from a program: ``self._debug_io = DebugStdIO()`` then
``await self._enter()``).

monarch_cy's :class:`~.console.Console` runs in a thread of its own and calls its io
synchronously; :class:`LoopIO` makes a ``DebugIO`` such an io: each call runs the
coroutine on the actor's loop and blocks the console's thread (never the loop) until
it is done.  Its input cannot be interrupted (``interruptible`` is False): a console
over it reads a line only when it needs one, as Monarch's does.
"""

from __future__ import annotations

import sys
from abc import abstractmethod

from monarch_cy._errors import DebugIOError

__all__ = ["DebugIO", "DebugStdIO", "DebugIOError", "LoopIO"]


class DebugIO:
    """The user's side of the debugger (Monarch's interface)."""

    @abstractmethod
    async def input(self, prompt: str = "") -> str: ...

    @abstractmethod
    async def output(self, msg: str) -> None: ...

    @abstractmethod
    async def quit(self) -> None: ...


class DebugStdIO(DebugIO):
    """This process's stdin and stdout."""

    async def input(self, prompt: str = "") -> str:
        import asyncio  # deferred: import time (monarch_cy.actor imports no asyncio)
        return await asyncio.to_thread(input, prompt)

    async def output(self, msg: str) -> None:
        sys.stdout.write(msg)
        sys.stdout.flush()

    async def quit(self) -> None:
        pass


class LoopIO:
    """A console io (``output``, ``input``, ``quit``, ``closed``) over ``debug_io``,
    whose coroutines run on ``loop`` (see the module docstring).  Once a call fails
    (end of input, the user gone) the io is closed: ``input`` returns None and
    ``output`` does nothing."""

    interruptible = False

    def __init__(self, debug_io: DebugIO, loop: "asyncio.AbstractEventLoop") -> None:
        self.debug_io = debug_io
        self.loop = loop
        self.closed = False

    def _run(self, coro):
        if self.closed:
            coro.close()
            return None
        import asyncio  # deferred: import time (as above)
        try:
            return asyncio.run_coroutine_threadsafe(coro, self.loop).result()
        except BaseException:  # noqa: BLE001 - any failure of the user's io ends it
            self.closed = True
            return None

    def output(self, text: str) -> None:
        self._run(self.debug_io.output(text))

    def input(self, prompt: str, idle=None) -> str | None:
        line = self._run(self.debug_io.input(prompt))
        return None if line is None else str(line).rstrip("\n")

    def quit(self) -> None:
        self._run(self.debug_io.quit())
