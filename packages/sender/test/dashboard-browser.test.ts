// @module-tag browser
// @module-tag pglite
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, shot, signedInWindow } from './fixtures/browser.js';
import { apiData, type DashboardSender, paymentEvent, startDashboardSender } from './fixtures/dashboard.js';

/** The dashboard in a real browser (fixtures/browser.ts). */

let sender: DashboardSender;
let browser: Browser;

const api = <T>(key: string, method: string, path: string, body?: unknown) =>
  apiData<T>(sender, key, method, path, body);

const makeEvent = () => paymentEvent(sender);

const signedIn = (key: string) => signedInWindow(browser, sender, key);

/** What {@link CARD_LABELS} finds: the labels it measured, and each collision. */
interface CardCheck {
  labels: number;
  problems: string[];
}

/**
 * In the page, every shown card label (a stacked table cell's `::before`, from its `data-label`):
 * its box must not overlap another label, must stay inside its cell, and the cell's content must
 * lie right of it (nothing of the value in the label's column).
 */
const CARD_LABELS = `(() => {
  const labels = [];
  const problems = [];
  const meets = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
  for (const td of document.querySelectorAll('table.stack td[data-label]')) {
    if (td.getClientRects().length === 0) continue;
    const cell = td.getBoundingClientRect();
    const style = getComputedStyle(td);
    const before = getComputedStyle(td, '::before');
    const left = cell.left + parseFloat(style.borderLeftWidth) + parseFloat(style.paddingLeft) + parseFloat(before.marginLeft);
    const top = cell.top + parseFloat(style.borderTopWidth) + parseFloat(style.paddingTop) + parseFloat(before.marginTop);
    const box = { left, top, right: left + parseFloat(before.width), bottom: top + parseFloat(before.height) };
    const name = td.dataset.label + ' (' + td.textContent.trim().slice(0, 30) + ')';
    if (!(box.right > box.left && box.bottom > box.top)) problems.push(name + ': no label box');
    if (box.left < cell.left - 0.5 || box.bottom > cell.bottom + 0.5) problems.push(name + ': label outside its cell');
    const range = document.createRange();
    range.selectNodeContents(td);
    for (const rect of range.getClientRects()) {
      // Nothing empty, nor text moved off the screen for screen readers only (.skip).
      if (rect.width === 0 || rect.height === 0 || rect.right <= 0) continue;
      if (rect.left < box.right - 0.5) problems.push(name + ': content in the label column');
    }
    for (const other of labels) if (meets(box, other.box)) problems.push(name + ': overlaps ' + other.name);
    labels.push({ box, name });
  }
  return { labels: labels.length, problems };
})()`;

/** In the page, the size each shown chart axis label is drawn at, in CSS pixels. */
const DRAWN_AXIS_FONT_SIZES = `[...document.querySelectorAll('svg.chart text.axis')]
  .filter((t) => t.getClientRects().length > 0)
  .map((t) => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a)`;

/** The focused element, as the keyboard test reads it. */
interface Focused {
  tag: string | undefined;
  text: string;
  href: string;
  outline: boolean;
}

beforeAll(async () => {
  browser = await launchChromium();
  sender = await startDashboardSender();
  await api(sender.keys.test, 'PATCH', '/accounts/settings', { webhook_urls: [sender.webhookUrl] });
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await sender?.close();
});

describe('the dashboard in Chromium', { timeout: 90_000 }, () => {
  it('signs in, and shows a sandbox payment and its events arriving live, without a reload', async () => {
    const { context, page } = await signedIn(sender.keys.test);
    try {
      await expect.poll(() => page.locator('#live-state').textContent()).toBe('Live: connected');
      // No reload from here on: the live stream and the refresh of the table bring everything.
      let reloaded = false;
      page.on('load', () => {
        reloaded = true;
      });
      const eventId = await makeEvent();
      await page.locator('#live-log tr', { hasText: 'payment.session.created' }).first().waitFor();
      await page.locator(`#events-table a[href="/dashboard/events/${eventId}"]`).waitFor();
      expect(reloaded).toBe(false);
      await shot(page, 'events');

      // The sandbox's payments: complete one with its button, and watch its success event arrive.
      await page.getByRole('link', { name: 'Payments' }).click();
      await page.waitForURL('**/dashboard/payments');
      await page.getByRole('button', { name: /Create session/ }).click();
      await page.waitForURL('**/dashboard/payments?notice=payment_created');
      await page
        .getByRole('button', { name: /^Complete payment/ })
        .first()
        .click();
      await page.waitForURL('**/dashboard/payments?notice=payment_succeeded');
      await shot(page, 'payments');
      // The live attempts are a table on the events page (not repeated at the foot of every page).
      expect(await page.locator('#live-log').count()).toBe(0);
      await page.getByRole('link', { name: 'Events' }).click();
      await page.locator('#live-log tr', { hasText: 'payment.session.succeeded' }).first().waitFor();
    } finally {
      await context.close();
    }
  });

  it('shows a failed attempt against a receiver answering 500; redeliver, and the new attempt turns 200', async () => {
    sender.answer(500);
    const eventId = await makeEvent();
    const { context, page } = await signedIn(sender.keys.test);
    try {
      await page.goto(`${sender.url}/dashboard/events/${eventId}`);
      await page.getByText('✗ HTTP 500').first().waitFor({ timeout: 20_000 });
      await expect.poll(() => page.locator('#deliveries').textContent()).toContain('receiver broke');
      sender.answer(200);
      await page.getByRole('button', { name: 'Redeliver this event' }).click();
      await page.waitForURL(`**/dashboard/events/${eventId}?notice=redelivered`);
      await expect.poll(() => page.getByRole('status').first().textContent()).toContain('Redelivered');
      // The new delivery's attempt appears through the live stream.
      await page.getByText('✓ HTTP 200').first().waitFor({ timeout: 20_000 });
      await shot(page, 'event');
    } finally {
      await context.close();
    }
  });

  it("refuses a private webhook URL with the rule's message, lists the endpoints, and shows one's page with its charts", async () => {
    const { context, page } = await signedIn(sender.keys.test);
    try {
      await page.getByRole('link', { name: 'Endpoints' }).click();
      await page.locator('#endpoints').getByText(sender.webhookUrl).waitFor();
      await page.getByLabel('URL', { exact: true }).fill('http://10.1.2.3/webhooks');
      await page.getByRole('button', { name: 'Add endpoint' }).click();
      const alert = page.getByRole('alert');
      await alert.waitFor();
      expect(await alert.textContent()).toMatch(/The webhook URL cannot receive events\..*private/is);
      expect(await api<{ webhook_urls: string[] }>(sender.keys.test, 'GET', '/accounts/settings')).toEqual({
        require_mfa: false,
        webhook_urls: [sender.webhookUrl],
      });
      await shot(page, 'endpoints');

      // The endpoint's page: status, filter, secret on demand, the charts of its attempts so far.
      await page.locator('#endpoints').getByRole('link', { name: sender.webhookUrl }).click();
      await page.getByRole('heading', { name: sender.webhookUrl }).waitFor();
      expect(await page.locator('svg.chart.wide').count()).toBe(2);
      expect(await page.locator('svg.chart.wide rect.ok').count()).toBeGreaterThan(0);
      await page
        .getByText(/\(show\)/)
        .first()
        .click();
      await expect.poll(() => page.locator('code.secret').first().isVisible()).toBe(true);
      await shot(page, 'endpoint');
      // Disable and enable with the page's buttons.
      await page.getByRole('button', { name: 'Disable' }).click();
      await page.waitForURL('**notice=endpoint_disabled');
      await page.getByRole('button', { name: 'Enable' }).click();
      await page.waitForURL('**notice=endpoint_enabled');
    } finally {
      await context.close();
    }
  });

  it('fits a 390 px wide screen: no page scrolls sideways, tables become cards whose labels keep their own column, chart labels stay 10 px or more', async () => {
    const { context, page } = await signedIn(sender.keys.test);
    try {
      await page.setViewportSize({ width: 390, height: 844 });
      const [endpoint] = await api<{ id: string }[]>(sender.keys.test, 'GET', '/webhook-endpoints');
      const eventId = await makeEvent();
      for (const [path, name] of [
        ['/dashboard/events', 'events-390'],
        [`/dashboard/events/${eventId}`, 'event-390'],
        ['/dashboard/endpoints', 'endpoints-390'],
        [`/dashboard/endpoints/${endpoint?.id}`, 'endpoint-390'],
        ['/dashboard/payments', 'payments-390'],
      ] as const) {
        await page.goto(`${sender.url}${path}`);
        const width = await page.evaluate<number>('document.documentElement.scrollWidth');
        expect(width, path).toBeLessThanOrEqual(390);
        const cards = await page.evaluate<CardCheck>(CARD_LABELS);
        expect(cards.problems, path).toEqual([]);
        if (path !== '/dashboard/payments') expect(cards.labels, path).toBeGreaterThan(0);
        if (name === 'endpoint-390') {
          // The endpoint's charts: each axis label as drawn (its font size times the SVG's scale).
          const ticks = await page.evaluate<number[]>(DRAWN_AXIS_FONT_SIZES);
          expect(ticks.length).toBeGreaterThanOrEqual(6);
          expect(Math.min(...ticks)).toBeGreaterThanOrEqual(10);
        }
        await shot(page, name);
      }
    } finally {
      await context.close();
    }
  });

  it("refuses a forged form post without the CSRF token, and shows 404 for another business's event", async () => {
    const eventId = await makeEvent();
    const { context, page } = await signedIn(sender.keys.other);
    try {
      // A form as another page would build it: the right cookie (same site here), no token.
      // (Functions given as text run in the page, whose DOM this Node program has no types for.)
      await page.evaluate(`(() => {
        const form = document.createElement('form');
        form.method = 'post';
        form.action = '/dashboard/events/${eventId}/redeliver';
        document.body.append(form);
        form.submit();
      })()`);
      await page.getByRole('heading', { name: 'Refused' }).waitFor();
      expect(await page.textContent('main')).toContain('CSRF token is missing or wrong');

      const response = await page.goto(`${sender.url}/dashboard/events/${eventId}`);
      expect(response?.status()).toBe(404);
      await page.getByRole('heading', { name: 'Not found' }).waitFor();
    } finally {
      await context.close();
    }
  });

  it('works from the keyboard alone, with a visible focus: sign in, skip to content, open an event, redeliver', async () => {
    const eventId = await makeEvent();
    const context = await browser.newContext();
    const page = await context.newPage();
    /** The element that has focus: its tag, text or label, and whether an outline shows it. */
    const focused = () =>
      page.evaluate<Focused>(`(() => {
        const el = document.activeElement;
        const style = el ? getComputedStyle(el) : undefined;
        return {
          tag: el?.tagName.toLowerCase(),
          text: (el?.getAttribute('aria-label') ?? el?.textContent ?? '').trim(),
          href: el?.getAttribute('href') ?? '',
          outline: style ? style.outlineStyle !== 'none' && Number.parseFloat(style.outlineWidth) >= 2 : false,
        };
      })()`);
    /** Presses Tab until `match` has focus (at most 60 times). */
    const tabTo = async (match: (f: Focused) => boolean) => {
      for (let i = 0; i < 60; i++) {
        await page.keyboard.press('Tab');
        const f = await focused();
        if (match(f)) return f;
      }
      throw new Error('never reached by Tab');
    };
    try {
      await page.goto(`${sender.url}/dashboard/sign-in`);
      // The key field has focus on arrival: the browser applies autofocus at its next rendering
      // opportunity, which may come after the load event on a busy machine.
      await expect.poll(async () => (await focused()).tag, { timeout: 5000 }).toBe('input');
      await page.keyboard.type(sender.keys.test);
      await page.keyboard.press('Enter');
      await page.waitForURL('**/dashboard/events');

      const skip = await tabTo((f) => f.text === 'Skip to content');
      expect(skip.outline).toBe(true);
      await page.keyboard.press('Enter');
      expect((await focused()).tag).toBe('main');

      const link = await tabTo((f) => f.href === `/dashboard/events/${eventId}`);
      expect(link.outline).toBe(true);
      await page.keyboard.press('Enter');
      await page.waitForURL(`**/dashboard/events/${eventId}`);

      const button = await tabTo((f) => f.text === 'Redeliver this event');
      expect(button.outline).toBe(true);
      await page.keyboard.press('Enter');
      await page.waitForURL(`**/dashboard/events/${eventId}?notice=redelivered`);
    } finally {
      await context.close();
    }
  });
});
