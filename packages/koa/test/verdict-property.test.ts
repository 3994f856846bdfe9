import Koa from 'koa';
import { runningApp } from '../../../test/conformance/adapter-conformance.js';
import { describeVerdictProperty } from '../../../test/conformance/verdict-property.js';
import { payhook } from '../src/index.js';

describeVerdictProperty('koa 3', async (receiver) => {
  const app = new Koa();
  app.silent = true;
  app.use(payhook(receiver, { path: '/webhooks' }));
  return runningApp(app.listen(0, '127.0.0.1'), '127.0.0.1');
});
