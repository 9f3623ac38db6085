"""millimcp: the server under development, with the same single ``echo`` tool."""

from millimcp import Server

server = Server("bench", version="1.0.0")


@server.tool()
async def echo(text: str) -> str:
    return text


app = server.asgi()
