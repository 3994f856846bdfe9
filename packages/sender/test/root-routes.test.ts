// @module-tag pglite
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './fixtures/app.js';

let sender: TestApp;

beforeAll(async () => {
  sender = await startTestApp('pglite', 'root-routes', { PAYHOOK_MAINTENANCE_INTERVAL_SECONDS: '0' });
}, 60_000);
afterAll(() => sender?.close());

describe('what a browser asks for at the root, without an API key', () => {
  it('GET / redirects (302) to the dashboard', async () => {
    const response = await fetch(`${sender.url}/`, { redirect: 'manual' });
    expect(response.status).toBe(302);
    expect(response.headers.get('location')).toBe('/dashboard');
    // And the dashboard takes it from there: to its sign-in page.
    const dashboard = await fetch(`${sender.url}/dashboard`, { redirect: 'manual' });
    expect(dashboard.headers.get('location')).toBe('/dashboard/sign-in');
  });

  it('GET /favicon.ico answers an SVG icon, not a 401', async () => {
    const response = await fetch(`${sender.url}/favicon.ico`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^image\/svg\+xml/);
    const body = await response.text();
    expect(body).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"[^>]*>.*<\/svg>$/s);
  });

  it('other paths still need a key, and neither route is in the API document', async () => {
    expect((await fetch(`${sender.url}/customers`)).status).toBe(401);
    expect((await fetch(`${sender.url}/favicon.png`)).status).toBe(401);
    const openapi = (await (await fetch(`${sender.url}/openapi.json`)).json()) as {
      paths: Record<string, unknown>;
    };
    expect(Object.keys(openapi.paths)).not.toContain('/');
    expect(Object.keys(openapi.paths)).not.toContain('/favicon.ico');
    expect(Object.keys(openapi.paths)).toContain('/accounts/settings');
  });
});
