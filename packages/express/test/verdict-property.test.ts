import express from 'express';
import { runningApp } from '../../../test/conformance/adapter-conformance.js';
import { describeVerdictProperty } from '../../../test/conformance/verdict-property.js';
import { payhook } from '../src/index.js';

describeVerdictProperty('express 5', async (receiver) => {
  const app = express();
  app.use('/webhooks', payhook(receiver));
  return runningApp(app.listen(0, '127.0.0.1'), '127.0.0.1');
});
