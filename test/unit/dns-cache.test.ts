import { describe, expect, it } from 'vitest';
import { cachingResolver } from '../../src/modules/channels/email/inbound.js';

/** A resolver that counts its queries and answers from a table; names not in it do not exist. */
function counting(table: Record<string, unknown>, failWith?: string) {
  const asked: string[] = [];
  const resolve = async (name: string, rrtype: string) => {
    asked.push(`${rrtype} ${name}`);
    await new Promise((r) => setTimeout(r, 5));
    if (failWith) throw Object.assign(new Error(`queryTxt ${failWith} ${name}`), { code: failWith });
    const records = table[`${rrtype} ${name}`];
    if (records === undefined) throw Object.assign(new Error(`queryTxt ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
    return records;
  };
  return { asked, resolve };
}

describe('the receiver keeps DNS answers for a while', () => {
  it('asks once for concurrent and repeated identical questions, and hands every caller its own copy', async () => {
    const dns = counting({ 'TXT example.com': [['v=spf1 -all']] });
    const resolver = cachingResolver(dns.resolve);
    const answers = await Promise.all(Array.from({ length: 20 }, () => resolver('example.com', 'TXT')));
    expect(answers.every((a) => JSON.stringify(a) === '[["v=spf1 -all"]]')).toBe(true);
    (answers[0] as string[][])[0]!.push('changed by a caller');
    expect(await resolver('EXAMPLE.com', 'TXT')).toEqual([['v=spf1 -all']]);
    expect(dns.asked).toEqual(['TXT example.com']);
    // Another type or name is another question.
    await resolver('example.com', 'MX').catch(() => undefined);
    expect(dns.asked).toEqual(['TXT example.com', 'MX example.com']);
  });

  it('keeps an answer that the name does not exist, and forgets a failure of the query itself', async () => {
    const absent = counting({});
    const resolver = cachingResolver(absent.resolve);
    for (let i = 0; i < 3; i++) await expect(resolver('_dmarc.nowhere.example', 'TXT')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    expect(absent.asked).toHaveLength(1);

    const timingOut = counting({}, 'ETIMEOUT');
    const flaky = cachingResolver(timingOut.resolve);
    for (let i = 0; i < 3; i++) await expect(flaky('example.com', 'TXT')).rejects.toMatchObject({ code: 'ETIMEOUT' });
    expect(timingOut.asked).toHaveLength(3);
  });

  it('asks again once the answer is older than its time to live', async () => {
    const dns = counting({ 'PTR 1.0.0.127.in-addr.arpa': ['localhost'] });
    const resolver = cachingResolver(dns.resolve, { ttlMs: 30 });
    await resolver('1.0.0.127.in-addr.arpa', 'PTR');
    await resolver('1.0.0.127.in-addr.arpa', 'PTR');
    expect(dns.asked).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 60));
    await resolver('1.0.0.127.in-addr.arpa', 'PTR');
    expect(dns.asked).toHaveLength(2);
  });
});
