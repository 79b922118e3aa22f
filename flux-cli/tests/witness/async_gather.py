import asyncio


async def worker(name, n):
    total = 0
    for i in range(n):
        total += i
        await asyncio.sleep(0)
    return name + "=" + str(total)


async def main():
    results = await asyncio.gather(worker("a", 2), worker("b", 3))
    return results


print(asyncio.run(main()))
