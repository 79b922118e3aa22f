import asyncio


async def fails(n):
    await asyncio.sleep(0)
    if n > 1:
        raise ValueError("too big: %d" % n)
    return n


async def main():
    out = []
    for n in range(3):
        try:
            out.append(await fails(n))
        except ValueError as e:
            out.append(str(e))
    return out


print(asyncio.run(main()))
