import asyncio


async def leaf(n):
    await asyncio.sleep(0)
    return n * 2


async def middle(n):
    a = await leaf(n)
    b = await leaf(n + 1)
    return a + b


async def main():
    x = await middle(1)
    y = await middle(10)
    return x + y


print(asyncio.run(main()))
