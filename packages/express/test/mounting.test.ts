import { createReceiver } from '@payhook/core';
import { createTestEvent } from '@payhook/core/testing';
import express from 'express';
import request from 'supertest';
import { describe, expect, it } from 'vitest';
import { payhook } from '../src/index.js';

const BIZ = 'f0e1d2c3-b4a5-4968-8776-5a4b3c2d1e0f';
const receiver = () => createReceiver({ businessIds: [BIZ], allowAnyIp: true, recoveryIntervalMs: 0 });
const event = () => createTestEvent('payment.session.created', BIZ);

describe('@payhook/express mounting', () => {
  it('works as a route handler (app.post) as well as with app.use', async () => {
    const app = express();
    app.post('/hooks/payments', payhook(receiver()));
    const res = await request(app)
      .post('/hooks/payments')
      .set('content-type', 'application/json')
      .send(JSON.stringify(event()));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ received: true });
  });

  it('with app.all, answers 405 to other methods', async () => {
    const app = express();
    app.all('/hooks', payhook(receiver()));
    expect((await request(app).get('/hooks')).status).toBe(405);
  });

  it('with app.use, leaves the paths below the webhook path to the rest of the app', async () => {
    const app = express();
    app.use('/webhooks', payhook(receiver()));
    app.get('/webhooks/health', (_req, res) => {
      res.send('ok');
    });
    const res = await request(app).get('/webhooks/health');
    expect(res.status).toBe(200);
    expect(res.text).toBe('ok');
  });

  it("leaves errors below the webhook path to the app's own error handlers", async () => {
    const app = express();
    app.use('/webhooks', payhook(receiver()));
    app.get('/webhooks/health', () => {
      throw new Error('down');
    });
    app.use((_error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(503).send('app handler');
    });
    const res = await request(app).get('/webhooks/health');
    expect(res.status).toBe(503);
    expect(res.text).toBe('app handler');
  });

  it("answers a route's own body parser refusal in payhook's shape", async () => {
    const app = express();
    app.post('/hooks', express.json({ limit: 64 }), payhook(receiver()));
    const res = await request(app)
      .post('/hooks')
      .set('content-type', 'application/json')
      .send(JSON.stringify(event()));
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('payload_too_large');
  });

  it('uses the raw bytes a body parser kept in req.rawBody', async () => {
    const app = express();
    app.use(
      express.json({
        verify: (req, _res, buf) => {
          (req as unknown as { rawBody: Buffer }).rawBody = Buffer.from(buf);
        },
      }),
    );
    app.use('/webhooks', payhook(receiver()));
    // Duplicate keys are visible only in the raw bytes: refused, although express.json() parsed it.
    const body = JSON.stringify(event()).replace('{"event":', '{"event":"x","event":');
    const res = await request(app).post('/webhooks').set('content-type', 'application/json').send(body);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('malformed_payload');
  });
});
