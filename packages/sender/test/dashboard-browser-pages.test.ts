// @module-tag browser
// @module-tag pglite
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, shot, signedInWindow } from './fixtures/browser.js';
import { apiData, type DashboardSender, paymentEvent, startDashboardSender } from './fixtures/dashboard.js';

/*
 * The dashboard's pages in Chromium (fixtures/browser.ts): what each notice's colour says, the
 * events rows as links, the event's payload near the top, the API reference's way back, and the
 * forms refusing every value they do not offer.
 */

let sender: DashboardSender;
let browser: Browser;

const api = <T>(method: string, path: string, body?: unknown) =>
  apiData<T>(sender, sender.keys.test, method, path, body);

beforeAll(async () => {
  browser = await launchChromium();
  sender = await startDashboardSender();
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await sender?.close();
});

/** A CSS colour variable of the dashboard's style sheet, as the page computes it. */
const cssColour = (page: Page, name: string) =>
  page.evaluate<string>(`(() => {
    const probe = document.createElement('span');
    probe.style.color = 'var(${name})';
    document.body.append(probe);
    const colour = getComputedStyle(probe).color;
    probe.remove();
    return colour;
  })()`);

describe("the dashboard's pages in Chromium", { timeout: 90_000 }, () => {
  it('draws a failing endpoint\'s "Failing." notice in the warning colour, never the success one', async () => {
    const { id } = await api<{ id: string }>('POST', '/webhook-endpoints', {
      url: `${sender.webhookUrl}?failing`,
    });
    sender.answer(500);
    const { context, page } = await signedInWindow(browser, sender, sender.keys.test);
    try {
      await paymentEvent(sender);
      await expect
        .poll(
          async () => {
            await page.goto(`${sender.url}/dashboard/endpoints/${id}`);
            return page.locator('#endpoint-state').textContent();
          },
          { timeout: 20_000 },
        )
        .toContain('Failing.');
      const border =
        await page.evaluate<string>(`getComputedStyle([...document.querySelectorAll('#endpoint-state [role="status"]')]
        .find((el) => el.textContent.includes('Failing.'))).borderLeftColor`);
      expect(border).not.toBe(await cssColour(page, '--ok'));
      expect(border).toBe(await cssColour(page, '--wait'));
      await shot(page, 'endpoint-failing');
    } finally {
      sender.answer(200);
      await api('DELETE', `/webhook-endpoints/${id}`);
      await context.close();
    }
  });

  it('opens an event from anywhere on its row, names it in full, and shows its payload right after the summary', async () => {
    const eventId = await paymentEvent(sender);
    const { context, page } = await signedInWindow(browser, sender, sender.keys.test);
    try {
      const row = page.locator('#events-table tbody tr', { hasText: eventId });
      // The whole id is on the row, and the link names the event by its type and id.
      await row.getByText(eventId, { exact: true }).waitFor();
      const link = row.getByRole('link');
      expect(await link.getAttribute('href')).toBe(`/dashboard/events/${eventId}`);
      expect(await link.textContent()).toContain(eventId);
      // A click on the row's time, not on the link's text, opens the event.
      // (The mouse itself: the link covers the cell, which is the point.)
      const cell = await row.locator('td[data-label="Created"]').boundingBox();
      if (!cell) throw new Error('the row has no Created cell on screen');
      await page.mouse.click(cell.x + cell.width / 2, cell.y + cell.height / 2);
      await page.waitForURL(`**/dashboard/events/${eventId}`);

      const top = (selector: string) =>
        page.locator(selector).evaluate((el) => el.getBoundingClientRect().top);
      const payload = await top('#payload');
      expect(payload).toBeGreaterThan(await top('main dl'));
      expect(payload).toBeLessThan(await top('#deliveries'));
      expect(payload).toBeLessThan(await top('button:has-text("Redeliver this event")'));
      expect(await page.locator('#payload').textContent()).toContain('"event": "payment.session.created"');
      await shot(page, 'event-payload');
    } finally {
      await context.close();
    }
  });

  it("shows the API reference under the dashboard's navigation, whose links lead back", async () => {
    const { context, page } = await signedInWindow(browser, sender, sender.keys.test);
    try {
      await page.getByRole('link', { name: 'API reference' }).click();
      await page.waitForURL('**/docs**');
      const nav = page.getByRole('navigation', { name: 'Dashboard' });
      await nav.waitFor();
      expect(await nav.getByRole('link', { name: 'API reference' }).getAttribute('aria-current')).toBe(
        'page',
      );
      for (const name of ['Events', 'Endpoints', 'Payments']) await nav.getByRole('link', { name }).waitFor();
      // Swagger UI still renders under it.
      await page.locator('.swagger-ui .opblock').first().waitFor({ timeout: 20_000 });
      await shot(page, 'docs');
      await page.getByRole('link', { name: '← Back to the dashboard' }).click();
      await page.waitForURL('**/dashboard/events');
      await page.goto(`${sender.url}/docs`);
      await nav.getByRole('link', { name: 'Endpoints' }).click();
      await page.waitForURL('**/dashboard/endpoints');
    } finally {
      await context.close();
    }
  });
});

/** A field of a page's form, given another value (or taken out) in the page; the form then submitted. */
interface Tamper {
  /** The form's `action`. */
  action: string;
  field: string;
  /** The value it is given; null takes the field out. */
  value: string | null;
}

/**
 * Changes one field of a form as it is on the page, submits it (without the browser's own checks),
 * and returns the answer's status.
 */
async function submitTampered(page: Page, { action, field, value }: Tamper): Promise<number> {
  const answer = page.waitForResponse((r) => r.request().method() === 'POST' && r.url().endsWith(action));
  await page.evaluate(`(() => {
    const form = [...document.querySelectorAll('form')].find((f) => f.getAttribute('action') === ${JSON.stringify(action)});
    const el = form.elements.namedItem(${JSON.stringify(field)});
    const value = ${JSON.stringify(value)};
    if (value === null) el.remove();
    else if (el.tagName === 'SELECT') el.options[el.selectedIndex].value = value;
    else if (el.type === 'checkbox') { el.checked = true; el.value = value; }
    else { el.type = 'text'; el.value = value; }
    form.submit();
  })()`);
  const response = await answer;
  await page.waitForLoadState();
  return response.status();
}

/** Posts `body` as it is from the page (a broken escape no form of a browser makes): the status. */
const postRawFromPage = (page: Page, action: string, body: string) =>
  page.evaluate<number>(`(async () => {
    const csrf = document.querySelector('input[name="_csrf"]').value;
    const response = await fetch(${JSON.stringify(action)}, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: '_csrf=' + encodeURIComponent(csrf) + '&' + ${JSON.stringify(body)},
    });
    return response.status;
  })()`);

describe("the dashboard's forms in Chromium", { timeout: 120_000 }, () => {
  it('refuses each garbled value of every form with a 4xx page, and the API reads everything back unchanged', async () => {
    const { id } = await api<{ id: string }>('POST', '/webhook-endpoints', {
      url: `${sender.webhookUrl}?forms`,
    });
    const eventId = await paymentEvent(sender);
    const [payment] = await api<{ payment: { id: string } }[]>('GET', '/payments?limit=1');
    const state = async () => ({
      endpoints: await api('GET', '/webhook-endpoints'),
      endpointSecrets: await api('GET', `/webhook-endpoints/${id}/signing-secrets`),
      businessSecrets: await api('GET', '/accounts/signing-secrets'),
      payments: await api('GET', '/payments'),
      event: await api('GET', `/events/${eventId}`),
    });
    const before = await state();
    const endpointPage = `/dashboard/endpoints/${id}`;
    const cases: [page: string, Tamper][] = [
      ...[null, 'Enabled', 'Disabled', 'disabled ', 'on'].map(
        (value) =>
          [endpointPage, { action: `${endpointPage}/status`, field: 'status', value }] as [string, Tamper],
      ),
      ...[null, '3600abc', '3600.5', '1e3', ''].map(
        (value) =>
          [endpointPage, { action: `${endpointPage}/rotate-secret`, field: 'overlap_seconds', value }] as [
            string,
            Tamper,
          ],
      ),
      ...['3600abc', '-60'].map(
        (value) =>
          [
            '/dashboard/endpoints',
            { action: '/dashboard/endpoints/rotate-secret', field: 'overlap_seconds', value },
          ] as [string, Tamper],
      ),
      ...[null, 'V1A', 'v2'].map(
        (value) =>
          ['/dashboard/endpoints', { action: '/dashboard/endpoints', field: 'signature_scheme', value }] as [
            string,
            Tamper,
          ],
      ),
      ['/dashboard/endpoints', { action: '/dashboard/endpoints', field: 'event:*', value: 'yes' }],
      [endpointPage, { action: `${endpointPage}/recover`, field: 'since', value: null }],
      ['/dashboard/events', { action: '/dashboard/events/redeliver', field: 'since', value: null }],
      ['/dashboard/payments', { action: '/dashboard/payments', field: 'amount', value: '150000abc' }],
      ['/dashboard/payments', { action: '/dashboard/payments', field: 'amount', value: null }],
      ...[null, 'Succeeded', 'FAILED'].map(
        (value) =>
          [
            '/dashboard/payments',
            { action: `/dashboard/payments/${payment?.payment.id}/complete`, field: 'outcome', value },
          ] as [string, Tamper],
      ),
    ];
    const { context, page } = await signedInWindow(browser, sender, sender.keys.test);
    try {
      for (const [path, tamper] of cases) {
        await page.goto(`${sender.url}${path}`);
        const status = await submitTampered(page, tamper);
        const what = `${tamper.action} ${tamper.field}=${tamper.value}`;
        expect(status, what).toBeGreaterThanOrEqual(400);
        expect(status, what).toBeLessThan(500);
        await page.getByRole('alert').first().waitFor();
      }
      await shot(page, 'form-refused');

      // Broken percent-encoding, which only a script can send: 400 on every form.
      await page.goto(`${sender.url}${endpointPage}`);
      for (const [action, body] of [
        [`${endpointPage}/status`, 'status=%ZZ'],
        [`${endpointPage}/rotate-secret`, 'overlap_seconds=36%0'],
        [`${endpointPage}/recover`, 'since=%E0%A4%A'],
        [`${endpointPage}/delete`, 'x=%ZZ'],
        ['/dashboard/endpoints', 'url=https%3A%2F%2Fmerchant.example%2F%ZZ&signature_scheme=v1'],
        ['/dashboard/endpoints/rotate-secret', 'overlap_seconds=%ZZ'],
        ['/dashboard/events/redeliver', 'since=%ZZ'],
        [`/dashboard/events/${eventId}/redeliver`, 'x=%ZZ'],
        ['/dashboard/payments', 'amount=%ZZ'],
        [`/dashboard/payments/${payment?.payment.id}/complete`, 'outcome=%ZZ'],
      ] as const) {
        expect(await postRawFromPage(page, action, body), `${action} ${body}`).toBe(400);
      }
      expect(await state()).toEqual(before);
    } finally {
      await context.close();
    }
  });
});
