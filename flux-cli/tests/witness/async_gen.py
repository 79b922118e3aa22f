import asyncio


async def ticker(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i * 10


class Session:
    def __init__(self):
        self.log = []

    async def __aenter__(self):
        self.log.append("open")
        return self

    async def __aexit__(self, et, ev, tb):
        self.log.append("close")
        return False


async def main():
    got = []
    async with Session() as s:
        async for v in ticker(3):
            got.append(v)
    squares = [v async for v in ticker(2)]
    return got, squares, s.log


print(asyncio.run(main()))
